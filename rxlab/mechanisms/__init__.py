"""Every mechanism rxlab models, declared once (``rxlab.mechanisms.base.Mechanism``).

``MECHANISMS`` is in the order of a packet's path; the cost stages, drop reasons and
event kinds take their indices from it (``kernel/stages.py``, ``kernel/drop_reasons.py``,
``kernel/events.py``), so a new mechanism adds its module here, and there only the named
constant (``C_<STAGE>``, ``EV_<KIND>``) its code uses. docs/architecture.md ("Adding a
mechanism") says what else a mechanism touches.
"""

from rxlab.mechanisms.arfs import ARFS
from rxlab.mechanisms.base import Array, Counter, Drop, Event, Mechanism, Stage
from rxlab.mechanisms.busy_poll import BUSY_POLL
from rxlab.mechanisms.cpumap import CPUMAP
from rxlab.mechanisms.flow_hash import FLOW_HASH
from rxlab.mechanisms.flow_limit import FLOW_LIMIT
from rxlab.mechanisms.napi import NAPI
from rxlab.mechanisms.napi_defer import NAPI_DEFER
from rxlab.mechanisms.napi_threads import NAPI_THREADS
from rxlab.mechanisms.nic import NIC
from rxlab.mechanisms.reuseport import REUSEPORT
from rxlab.mechanisms.rfs import RFS
from rxlab.mechanisms.rps import RPS
from rxlab.mechanisms.rss import RSS
from rxlab.mechanisms.sched import SCHED
from rxlab.mechanisms.socket import SOCKET
from rxlab.mechanisms.tcp import TCP
from rxlab.mechanisms.xdp import XDP
from rxlab.mechanisms.xsk import XSK

MECHANISMS: tuple[Mechanism, ...] = (
    NIC, RSS, NAPI, NAPI_THREADS, NAPI_DEFER, RPS, FLOW_LIMIT, FLOW_HASH, RFS, ARFS, SOCKET,
    REUSEPORT, SCHED, XDP, CPUMAP, XSK, TCP, BUSY_POLL,
)
BY_NAME = {m.name: m for m in MECHANISMS}

STAGES: tuple[Stage, ...] = tuple(st for m in MECHANISMS for st in m.stages)
DROPS: tuple[Drop, ...] = tuple(d for m in MECHANISMS for d in m.drops)
EVENTS: tuple[Event, ...] = tuple(e for m in MECHANISMS for e in m.events)

__all__ = ["BY_NAME", "DROPS", "EVENTS", "MECHANISMS", "STAGES", "Array", "Counter", "Drop",
           "Event", "Mechanism", "Stage"]


def index_of(items, name: str) -> int:
    """A declared item's index by name (a stage, a drop reason, an event, a counter)."""
    for i, it in enumerate(items):
        if it.name == name:
            return i
    raise KeyError(f"{name!r} is not declared by any mechanism")
