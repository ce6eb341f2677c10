"""cpumap: XDP_REDIRECT to another CPU's kthread through bulk queues and a ptr_ring."""

from rxlab.mechanisms.base import Counter, Drop, Event, Mechanism, Stage

CPUMAP = Mechanism(
    name="cpumap",
    kernel="cpu_map_enqueue, bq_enqueue, bq_flush_to_queue, cpu_map_kthread_run "
           "(kernel/bpf/cpumap.c), xdp_do_flush (net/core/filter.c), "
           "include/linux/ptr_ring.h",
    code=("xdp/cpumap.py",),
    stages=(
        Stage("xdp_redirect_cpumap", "xdp_do_redirect -> cpu_map_enqueue -> bq_enqueue",
              per_packet=True),
        Stage("cpumap_enqueue_full", "bq_flush_to_queue: a failed __ptr_ring_produce and "
                                     "xdp_return_frame_rx_napi"),
        Stage("cpumap_kthread", "cpu_map_kthread_run per frame: __ptr_ring_consume and "
                                "the frame's handling", per_packet=True),
        Stage("skb_build", "__xdp_build_skb_from_frame (net/core/xdp.c) in the kthread",
              per_packet=True),
    ),
    drops=(Drop("cpumap_full", "bq_flush_to_queue: the entry's ptr_ring slot was not "
                               "empty"),),
    events=(Event("CPUMAP_WAKE", "arg cpumap entry: wake_up_process(kthread) reaches its "
                                 "CPU"),),
    counters=(
        Counter("enqueued", "frames put on the entry's ptr_ring (xdp_cpumap_enqueue "
                            "processed)"),
        Counter("enqueue_drops", "frames dropped at a full ptr_ring (xdp_cpumap_enqueue "
                                 "drops)"),
        Counter("flushes", "bq_flush_to_queue calls (xdp_cpumap_enqueue events)"),
        Counter("kthread_processed", "frames the kthread turned into skbs "
                                     "(xdp_cpumap_kthread processed)"),
        Counter("kthread_batches", "kthread loop passes that took frames"),
        Counter("kthread_wakeups", "wake-ups of the kthread"),
    ),
    flags=("cpumap_gro",),
    knobs=("cpumap",),
    output=("cpumap",),
)
