"""Cost stages: the per-packet and per-event costs of a cost profile.

``STAGES`` names them as the profile YAML keys do (rxlab/profiles/*.yaml); ``C_<NAME>`` is
a stage's index into ``Params.cost_ns`` / ``cost_i``, which compiled code passes to
``accounting.cost``. ``JITTERED`` lists the stages that are per-packet CPU work.
"""

STAGES = (
    "hardirq",
    "irq_latency",
    "napi_poll",
    "driver_rx",
    "gro",
    "rps_enqueue",
    "stack_rx",
    "socket_enqueue",
    "cross_cpu_miss",
    "ipi_send",
    "ipi_latency",
    "ipi_recv",
    "wakeup_latency",
    "recvmsg",
    "arfs_steer",
    "arfs_program",
    # XDP and cpumap (kernel/bpf/cpumap.c; costs: rxlab/profiles/modern-x86.yaml)
    "xdp_prog",
    "xdp_drop",
    "xdp_tx",
    "xdp_redirect_cpumap",
    "xdp_rx_hash",
    "xdp_flow_hash",
    "cpumap_enqueue_full",
    "cpumap_kthread",
    "skb_build",
    "sw_hash",
    "xsk_zc",
    "xsk_copy",
    # TCP receive and where it runs relative to the reading thread (docs/model.md)
    "tcp_rcv",
    "tcp_remote",
    "tcp_ofo",
    # the ice service task's walk of its filter list under arfs_lock (rxlab/nic/arfs.py)
    "arfs_sync_entry",
    "arfs_sync_bucket",
    # try_to_wake_up of a thread on another CPU: the waker's time (rxlab/kernel/wake.py)
    "wakeup_remote",
)
(
    C_HARDIRQ,
    C_IRQ_LATENCY,
    C_NAPI_POLL,
    C_DRIVER_RX,
    C_GRO,
    C_RPS_ENQUEUE,
    C_STACK_RX,
    C_SOCKET_ENQUEUE,
    C_CROSS_CPU,
    C_IPI_SEND,
    C_IPI_LATENCY,
    C_IPI_RECV,
    C_WAKEUP_LATENCY,
    C_RECVMSG,
    C_ARFS_STEER,
    C_ARFS_PROGRAM,
    C_XDP_PROG,
    C_XDP_DROP,
    C_XDP_TX,
    C_XDP_REDIRECT_CPUMAP,
    C_XDP_RX_HASH,
    C_XDP_FLOW_HASH,
    C_CPUMAP_ENQUEUE_FULL,
    C_CPUMAP_KTHREAD,
    C_SKB_BUILD,
    C_SW_HASH,
    C_XSK_ZC,
    C_XSK_COPY,
    C_TCP_RCV,
    C_TCP_REMOTE,
    C_TCP_OFO,
    C_ARFS_SYNC_ENTRY,
    C_ARFS_SYNC_BUCKET,
    C_WAKEUP_REMOTE,
) = range(len(STAGES))
# per-packet CPU work is jittered; latencies and fixed per-event overheads are not
JITTERED = ("driver_rx", "gro", "rps_enqueue", "stack_rx", "socket_enqueue", "recvmsg",
            "xdp_prog", "xdp_drop", "xdp_tx", "xdp_redirect_cpumap", "cpumap_kthread",
            "skb_build", "xsk_zc", "xsk_copy", "tcp_rcv", "tcp_remote", "tcp_ofo")
