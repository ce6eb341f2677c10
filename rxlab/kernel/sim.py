"""``Sim``: the whole simulation state as one NamedTuple handed to the jitted loop.

Jitted mechanisms take ``s`` and read ``s.p`` (Params), ``s.nic``, ``s.sd``
(SoftnetData), ``s.so`` (sockets, threads), ``s.st`` (Stats), ``s.ev`` (Calendar),
``s.rf`` (RFS tables), ``s.ar`` (aRFS filters) and ``s.cm`` (cpumap entries) and
``s.wire`` (the chunk of arrivals being merged).
"""

from typing import NamedTuple

import numpy as np

from rxlab.engine.core import Calendar
from rxlab.kernel.state import (
    ArfsState,
    Arrivals,
    CpumapState,
    NicState,
    Params,
    RfsState,
    SockState,
    SoftnetData,
    Stats,
)


class Sim(NamedTuple):
    p: Params
    nic: NicState
    sd: SoftnetData
    so: SockState
    st: Stats
    ev: Calendar
    rf: RfsState
    ar: ArfsState
    cm: CpumapState
    wire: Arrivals  # the chunk being merged (rx_loop.feed sets it)


def sim_of(m) -> Sim:
    """The Sim of a built model (``rxlab.build.build``): the same arrays, no copies."""
    return Sim(m.params, m.nic, m.sd, m.so, m.st, m.ev, m.rf, m.ar, m.cm, no_arrivals())


def no_arrivals() -> Arrivals:
    e = np.empty(0, np.int64)
    i = np.empty(0, np.int32)
    return Arrivals(e, e, i, i, np.empty(0, np.bool_), np.zeros(2, np.int64))
