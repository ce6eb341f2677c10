"""What the model counts, and the categories it splits CPU time into.

Index constants into the counter arrays of ``Stats`` (``cnt``, ``cpu_ns``, ``ts_cpu``,
``ts_pkt``), ``RfsState.cnt``, ``CpumapState.cnt`` and ``ArfsState.cnt``, with the names
the result reports them under (``rxlab/metrics/result.py``). CPU time categories follow
the kernel's ``enum cpu_usage_stat`` (include/linux/kernel_stat.h) plus ksoftirqd.
"""

from rxlab.kernel.drop_reasons import N_DROP_SLOTS

# --- global counters (Stats.cnt) ----------------------------------------------------
CNT_OFFERED = 0  # packets that reached the NIC
CNT_DELIVERED = 1  # read by an application thread
CNT_SOCKET_IN = 2  # queued on a socket
CNT_REORDERED = 3  # arrived at the socket behind a later packet of the same flow
CNT_LAT_SOCK_N = 4
CNT_LAT_APP_N = 5
CNT_GOOD_QUEUE = 6  # arrived on the rx queue whose IRQ CPU runs the flow's consumer
CNT_BAD_QUEUE = 7  # arrived elsewhere (flows that have a consumer only)
CNT_FORWARDED = 8  # sent back out by XDP_TX: a packet's third way out (not dropped)
CNT_XDP_PASS = 9  # XDP program verdicts (ethtool -S rx_queue_N_xdp_* style totals)
CNT_XDP_REDIRECT = 10
CNT_XDP_RUNS = 11
CNT_DROP0 = 12  # CNT_DROP0 + reason
N_CNT = CNT_DROP0 + N_DROP_SLOTS

# --- CPU time categories (Stats.cpu_ns, win_cpu, ts_cpu) ----------------------------
CPU_CATS = ("softirq", "ksoftirqd", "hardirq", "system", "user")
T_SOFTIRQ, T_KSOFTIRQD, T_HARDIRQ, T_SYSTEM, T_USER = range(len(CPU_CATS))

# --- per-interval packet series (Stats.ts_pkt) --------------------------------------
TS_PKT = ("offered", "delivered", "dropped", "processed")
TS_OFFERED, TS_DELIVERED, TS_DROPPED, TS_PROCESSED = range(len(TS_PKT))

# --- exact latency sums for the means (Stats.lat_sum) --------------------------------
LAT_SUMS = ("to_socket", "to_app", "nic_wait")
LAT_SOCK, LAT_APP, LAT_NIC = range(len(LAT_SUMS))

# --- latency histogram: log-linear, 64 sub-buckets per power of two (~1.6 %) --------
HIST_BINS = 128 + 64 * 40

RFS_CNT = ("rfs_steered", "rfs_moves", "rfs_held", "arfs_calls")
N_RFS_CNT = len(RFS_CNT)
RFS_STEERED, RFS_MOVES, RFS_HELD, RFS_ARFS_CALLS = range(N_RFS_CNT)

CPUMAP_CNT = ("enqueued", "enqueue_drops", "flushes", "kthread_processed", "kthread_batches",
              "kthread_wakeups")
N_CPUMAP_CNT = len(CPUMAP_CNT)
(CM_ENQUEUED, CM_DROPS, CM_FLUSHES, CM_PROCESSED, CM_BATCHES, CM_WAKEUPS) = range(N_CPUMAP_CNT)

ARFS_CNT = ("arfs_add", "arfs_update", "arfs_skip", "arfs_expire", "arfs_avoided",
            "arfs_hw_full", "arfs_programmed", "arfs_no_memory",
            # arfs_lock: acquisitions that found it held, the softirqs' spin (ns), the
            # service task's sync runs, its spin and its hold of the lock (ns)
            "arfs_lock_contended", "arfs_lock_wait_ns", "arfs_sync_runs",
            "arfs_sync_wait_ns", "arfs_sync_hold_ns")
N_ARFS_CNT = len(ARFS_CNT)
(ARFS_ADD, ARFS_UPDATE, ARFS_SKIP, ARFS_EXPIRE, ARFS_AVOIDED, ARFS_HW_FULL,
 ARFS_PROGRAMMED, ARFS_NO_MEMORY, ARFS_LOCK_CONTENDED, ARFS_LOCK_WAIT_NS, ARFS_SYNC_RUNS,
 ARFS_SYNC_WAIT_NS, ARFS_SYNC_HOLD_NS) = range(N_ARFS_CNT)
