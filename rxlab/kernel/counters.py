"""What the model counts, and the categories it splits CPU time into.

Index constants into the counter arrays of ``Stats`` (``cnt``, ``cpu_ns``, ``ts_cpu``,
``ts_pkt``), with the names the result reports them under (``rxlab/metrics/result.py``),
and the counter structs of ``RfsState``, ``ArfsState`` and ``CpumapState``, whose fields
their mechanisms declare. CPU time categories follow
the kernel's ``enum cpu_usage_stat`` (include/linux/kernel_stat.h) plus ksoftirqd.
"""

from rxlab.kernel.drop_reasons import N_DROP_SLOTS
from rxlab.mechanisms import ARFS, CPUMAP, RFS

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

# --- mechanisms' counter structs (declared in rxlab/mechanisms/): one record per state,
# or per entry (cpumap); compiled code adds to ``rf.cnt[0].rfs_steered``, the result reads
# the fields by these names
RFS_COUNTERS = RFS.counter_dtype  # RfsState.cnt[1]
ARFS_COUNTERS = ARFS.counter_dtype  # ArfsState.cnt[1]
CPUMAP_COUNTERS = CPUMAP.counter_dtype  # CpumapState.cnt[E]
RFS_CNT, ARFS_CNT, CPUMAP_CNT = (tuple(c.name for c in m.counters) for m in (RFS, ARFS, CPUMAP))
