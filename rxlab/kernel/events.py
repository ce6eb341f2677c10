"""Every event kind of the receive-path loop, numbered from the declarations.

An event is a ``kind`` and an ``arg`` in the calendar (``rxlab.engine.core``), at a
priority named after the context it models (``PRIO_*`` there); ``rx_loop.handle_event``
maps each kind to its mechanism. A mechanism declares its kinds (``rxlab/mechanisms/``,
``Event``); ``EV_<NAME>`` is 1 + the kind's index among all declared kinds.
"""

from rxlab.mechanisms import EVENTS, index_of

EVENT_DOC = {e.name: e.doc for e in EVENTS}  # what a kind's arg is and what it models


def _ev(name: str) -> int:
    return 1 + index_of(EVENTS, name)


EV_CPU = _ev("CPU")
EV_IRQ = _ev("IRQ")
EV_IPI = _ev("IPI")
EV_WAKE = _ev("WAKE")
EV_MIGRATE = _ev("MIGRATE")
EV_ARFS_SVC = _ev("ARFS_SVC")
EV_ARFS_TIMER = _ev("ARFS_TIMER")
EV_CPUMAP_WAKE = _ev("CPUMAP_WAKE")
EV_NAPI_WAKE = _ev("NAPI_WAKE")
EV_NAPI_TIMER = _ev("NAPI_TIMER")
EV_BUSY_POLL = _ev("BUSY_POLL")
