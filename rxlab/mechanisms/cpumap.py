"""cpumap: XDP_REDIRECT to another CPU's kthread through bulk queues and a ptr_ring."""

import numpy as np

from rxlab.kernel.constants import CPU_MAP_BULK_SIZE
from rxlab.kernel.state import CPUMAP_ENTRY, SKB
from rxlab.mechanisms.base import Array, Counter, Drop, Event, Mechanism, Stage


def arrays(sc) -> tuple[Array, ...]:
    """Per source CPU a bulk queue of CPU_MAP_BULK_SIZE frames per entry and its flush
    list, each entry's ptr_ring of cpumap.qsize, its record and counters, and the per-CPU
    round-robin position of each XDP rule (one entry, ring and rule when unused)."""
    ncpu, cm = sc.host.cpus, sc.cpumap
    ne = max(1, len(cm.cpu_list()) if cm else 0)
    q = cm.qsize if cm else 1
    nrr = max(1, len(sc.xdp.rules) if sc.xdp else 0)
    i64 = np.int64
    return (Array("bq_n", i64, (ncpu, ne)), Array("bq", SKB, (ncpu, ne, CPU_MAP_BULK_SIZE)),
            Array("flush_n", i64, (ncpu,)), Array("flush_list", i64, (ncpu, ne)),
            Array("ring", SKB, (ne, q)), Array("entry", CPUMAP_ENTRY, (ne,)),
            Array("rr", i64, (ncpu, nrr)), Array("cnt", CPUMAP.counter_dtype, (ne,)))


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
    arrays=arrays,
    sized_by="cpumap.cpus",
    state_in="cm",
)
