"""``Sim``: the whole simulation state as one NamedTuple handed to the jitted loop.

Jitted mechanisms take ``s`` and read ``s.p`` (Params), ``s.nic``, ``s.sd``
(SoftnetData), ``s.so`` (sockets, threads), ``s.st`` (Stats), ``s.ev`` (Calendar),
``s.rf`` (RFS tables), ``s.ar`` (aRFS filters) and ``s.cm`` (cpumap entries).
"""

from typing import NamedTuple

from rxlab.engine.core import Calendar
from rxlab.kernel.state import (
    ArfsState,
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


def sim_of(m) -> Sim:
    """The Sim of a built model (``rxlab.build.build``): the same arrays, no copies."""
    return Sim(m.params, m.nic, m.sd, m.so, m.st, m.ev, m.rf, m.ar, m.cm)
