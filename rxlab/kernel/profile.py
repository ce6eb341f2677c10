"""Where the compiled loop spends its time: cycle counts per event kind and per mechanism
(``benchmarks/profile.py SCENARIO`` prints them; docs/performance.md explains the table).

Compiled in only with ``RXLAB_PROFILE=1`` (``rxlab.engine.cycles.PROFILE``): then
``prof_start``/``prof_stop`` around a call add one call and its cycles to
``s.st.prof[site]``; otherwise they compile to nothing and the loop is the same machine
code. Sites nest (a NAPI poll inside an EV_CPU event), so a site's cycles include those
of the sites inside it; the table says which site is inside which. Reading the counter
costs ~20-40 cycles per site, which the per-packet sites include.
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_HELPER
from rxlab.engine.cycles import PROFILE, _readcyclecounter
from rxlab.mechanisms import EVENTS

# (name, the site it is inside): every event kind in handle_event, then the mechanisms
SITES = (
    ("run", ""),  # every call of rx_loop.run (the whole loop)
    ("ingest", "run"),  # an arrival into its rx ring (rx_loop.run)
    # one per event kind, in the order of their values (rxlab.kernel.events): P_EV0 + kind - 1
    *((f"ev_{e.name.lower()}", "run") for e in EVENTS),
    # rx_loop.dispatch, in its order: what ends a segment, the choice, what runs next
    ("segment_end", "ev_cpu"),  # napi_segment_end, app_after_read, debts, ... (accounting)
    ("pick_next", "ev_cpu"),  # the scheduler's choice
    ("run_thread", "ev_cpu"),  # a thread's segment: an application read, a kthread, ...
    ("net_rx_action_next", "ev_cpu"),  # the next NAPI of net_rx_action, or its end
    ("napi_poll", "ev_cpu"),  # one __napi_poll: a driver poll or process_backlog
    ("get_rps_cpu", "napi_poll"),  # per packet in a driver poll
    ("enqueue_to_backlog", "napi_poll"),  # per packet steered to a backlog
    ("netif_receive_skb", "napi_poll"),  # per packet delivered up the stack from the ring
    ("softirq_segment", "ev_cpu"),  # charging a softirq segment, ksoftirqd's wake-up
)
P = {name: np.int64(i) for i, (name, _) in enumerate(SITES)}
# EV_x's site: P_EV0 + EV_x - 1
P_RUN, P_INGEST, P_EV0 = P["run"], P["ingest"], P[f"ev_{EVENTS[0].name.lower()}"]
P_SEGMENT_END, P_PICK_NEXT, P_RUN_THREAD = P["segment_end"], P["pick_next"], P["run_thread"]
P_RX_ACTION_NEXT, P_NAPI_POLL = P["net_rx_action_next"], P["napi_poll"]
P_SOFTIRQ_SEGMENT = P["softirq_segment"]
P_GET_RPS_CPU, P_ENQUEUE, P_RECEIVE = (P["get_rps_cpu"], P["enqueue_to_backlog"],
                                       P["netif_receive_skb"])


@njit(**JIT_HELPER)
def prof_start():
    if PROFILE:
        return np.int64(_readcyclecounter())
    return np.int64(0)


@njit(**JIT_HELPER)
def prof_stop(s, site, t0):
    if PROFILE:
        s.st.prof[site, 0] += 1
        s.st.prof[site, 1] += np.int64(_readcyclecounter()) - t0
