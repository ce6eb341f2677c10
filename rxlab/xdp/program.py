"""The XDP program on the rx queues: its verdict per packet (jitted side).

The program is compiled from the scenario's rules once per flow (``rxlab.xdp.rules``):
each flow gets a verdict and, for a cpumap redirect, a key chosen by the flow's hash or
left to a per-CPU round robin (the ``xdp_redirect_cpu`` sample's ``cpus_iterator``),
the only per-packet decision, made here.
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.accounting import cost, drop
from rxlab.kernel.counters import CNT_FORWARDED, CNT_XDP_PASS, CNT_XDP_REDIRECT, CNT_XDP_RUNS
from rxlab.kernel.drop_reasons import DROP_XDP_ABORTED, DROP_XDP_DROP
from rxlab.kernel.stages import C_XDP_DROP, C_XDP_PROG, C_XDP_REDIRECT_CPUMAP, C_XDP_TX
from rxlab.kernel.state import XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_REDIRECT_XSK
from rxlab.xdp.cpumap import bq_enqueue
from rxlab.xdp.xsk_rx import xsk_rcv


@njit(**JIT_STATE)
def redirect_key(s, c, f):
    """bpf_redirect_map's key: the flow's own, or the next of the rule's round robin."""
    p, cm = s.p, s.cm
    cpu = p.flow[f].xdp_cpu
    if cpu < 0:
        r = p.flow[f].xdp_rule
        k = cm.rr[c, r]
        cpu = p.xdp_rr_cpus[r, k]
        cm.rr[c, r] = (k + 1) % p.xdp_rr_n[r]
    return cpu


@njit(**JIT_STATE)
def xdp_rx(s, c, q, f, tarr, seq, length, t):
    """Run the program on one descriptor of rx queue q in the driver poll on CPU c.

    Returns (verdict, time): XDP_PASS means the driver builds an skb as without XDP;
    any other verdict has already been carried out here.
    """
    p, st = s.p, s.st
    st.cnt[CNT_XDP_RUNS] += 1
    t += cost(s, C_XDP_PROG)
    r = p.flow[f].xdp_rule
    if r >= 0:
        t += int(p.xdp_cost_extra[r] + 0.5)  # hashing / metadata the rule's program does
    act = p.flow[f].xdp_act
    if act == XDP_REDIRECT:
        e = p.cpu[redirect_key(s, c, f)].cm_entry
        if e >= 0:
            st.cnt[CNT_XDP_REDIRECT] += 1
            t += cost(s, C_XDP_REDIRECT_CPUMAP)
            return act, bq_enqueue(s, c, e, f, tarr, seq, length, t)
        act = XDP_ABORTED  # map miss: bpf_redirect_map returns its flags (0 = ABORTED)
    elif act == XDP_REDIRECT_XSK:
        sk = p.queue[q].xsk_of_queue
        if sk >= 0:
            st.cnt[CNT_XDP_REDIRECT] += 1
            return act, xsk_rcv(s, c, sk, f, tarr, seq, length, t)
        act = XDP_ABORTED  # no socket in XSKMAP[rx_queue_index]
    if act == XDP_PASS:
        st.cnt[CNT_XDP_PASS] += 1
        return act, t
    if act == XDP_DROP or act == XDP_ABORTED:
        t += cost(s, C_XDP_DROP)
        drop(s, DROP_XDP_DROP if act == XDP_DROP else DROP_XDP_ABORTED, t)
        return act, t
    t += cost(s, C_XDP_TX)  # XDP_TX: back out of the same port
    st.cnt[CNT_FORWARDED] += 1
    return act, t
