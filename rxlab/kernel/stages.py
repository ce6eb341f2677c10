"""Cost stages: the per-packet and per-event costs of a cost profile.

Each stage is declared by the mechanism whose code charges it (``rxlab/mechanisms/``,
with the kernel function that spends the time); ``STAGES`` names them as the profile YAML
keys do (rxlab/profiles/*.yaml), in declaration order. ``C_<NAME>`` is a stage's index
into ``Params.cost_ns`` / ``cost_i``, which compiled code passes to ``accounting.cost``.
``JITTERED`` lists the stages that are per-packet CPU work.
"""

from rxlab.mechanisms import STAGES as _DECLARED
from rxlab.mechanisms import index_of

STAGES = tuple(st.name for st in _DECLARED)
JITTERED = tuple(st.name for st in _DECLARED if st.per_packet)
STAGE_KERNEL = {st.name: st.kernel for st in _DECLARED}  # where the kernel spends it


def _c(name: str) -> int:
    return index_of(_DECLARED, name)


C_HARDIRQ = _c("hardirq")
C_IRQ_LATENCY = _c("irq_latency")
C_NAPI_POLL = _c("napi_poll")
C_DRIVER_RX = _c("driver_rx")
C_GRO = _c("gro")
C_RPS_ENQUEUE = _c("rps_enqueue")
C_STACK_RX = _c("stack_rx")
C_SOCKET_ENQUEUE = _c("socket_enqueue")
C_CROSS_CPU = _c("cross_cpu_miss")
C_IPI_SEND = _c("ipi_send")
C_IPI_LATENCY = _c("ipi_latency")
C_IPI_RECV = _c("ipi_recv")
C_WAKEUP_LATENCY = _c("wakeup_latency")
C_RECVMSG = _c("recvmsg")
C_ARFS_STEER = _c("arfs_steer")
C_ARFS_PROGRAM = _c("arfs_program")
C_XDP_PROG = _c("xdp_prog")
C_XDP_DROP = _c("xdp_drop")
C_XDP_TX = _c("xdp_tx")
C_XDP_REDIRECT_CPUMAP = _c("xdp_redirect_cpumap")
C_XDP_RX_HASH = _c("xdp_rx_hash")
C_XDP_FLOW_HASH = _c("xdp_flow_hash")
C_CPUMAP_ENQUEUE_FULL = _c("cpumap_enqueue_full")
C_CPUMAP_KTHREAD = _c("cpumap_kthread")
C_SKB_BUILD = _c("skb_build")
C_SW_HASH = _c("sw_hash")
C_XSK_ZC = _c("xsk_zc")
C_XSK_COPY = _c("xsk_copy")
C_TCP_RCV = _c("tcp_rcv")
C_TCP_REMOTE = _c("tcp_remote")
C_TCP_OFO = _c("tcp_ofo")
C_ARFS_SYNC_ENTRY = _c("arfs_sync_entry")
C_ARFS_SYNC_BUCKET = _c("arfs_sync_bucket")
C_WAKEUP_REMOTE = _c("wakeup_remote")
C_NAPI_WATCHDOG = _c("napi_watchdog")
