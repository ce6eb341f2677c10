"""``Sim``: the whole simulation state as one NamedTuple handed to the jitted loop.

Jitted mechanisms take ``s`` and read ``s.p`` (Params), ``s.nic``, ``s.sd``
(SoftnetData), ``s.so`` (sockets, threads), ``s.st`` (Stats) and ``s.ev`` (Calendar).
"""

from typing import NamedTuple

from rxlab.engine.core import Calendar
from rxlab.kernel.state import NicState, Params, SockState, SoftnetData, Stats


class Sim(NamedTuple):
    p: Params
    nic: NicState
    sd: SoftnetData
    so: SockState
    st: Stats
    ev: Calendar


def new_sim(p, nic, sd, so, st, ev) -> Sim:
    return Sim(p, nic, sd, so, st, ev)
