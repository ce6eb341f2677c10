"""Kernel constants under their kernel names, with unit, constraint and source file.

Source: Linux 6.19 (the file is named per constant).
"""

# net/core/dev.h: must be a power of two; buckets are u8 so history/2 must fit.
FLOW_LIMIT_HISTORY = 1 << 7  # packets remembered per CPU (scaling.rst still says 256)
# The mail of seed 003 (patch v4, 2013) describes a 256-packet history and scaling.rst
# still says 256, but merged code has had (1 << 7) since (old trees read: skb_flow_limit
# with num_buckets and FLOW_LIMIT_HISTORY (1 << 7)). kernel.flow_limit_variant "2013"
# models the mail's 256-packet description; "current" the code.
FLOW_LIMIT_HISTORY_2013 = 1 << 8

# net/core/hotdata.c defaults
NETDEV_MAX_BACKLOG = 1000  # packets in input_pkt_queue (check is qlen > max, enqueue_to_backlog)
NETDEV_BUDGET = 300  # packets per net_rx_action
DEV_WEIGHT = 64  # weight_p: quota of the per-CPU backlog NAPI
NAPI_POLL_WEIGHT = 64  # include/linux/netdevice.h: typical driver NAPI weight
FLOW_LIMIT_TABLE_LEN = 1 << 12  # net.core.flow_limit_table_len, power of two
GRO_NORMAL_BATCH = 8

# kernel/sched/fair.c: CFS / EEVDF tunables for nice-0 tasks (ns), before the scaling by
# 1 + ilog2(min(ncpus, 8)) (get_update_sysctl_factor, SCHED_TUNABLESCALING_LOG)
SCHED_BASE_SLICE_NS = 700_000  # EEVDF request size; 750_000 before 2ae891b82695 (v6.15)
SCHED_BASE_SLICE_NS_V66 = 750_000
SCHED_LATENCY_NS = 6_000_000  # CFS (before v6.6): the period nr <= sched_nr_latency share
SCHED_MIN_GRANULARITY_NS = 750_000  # CFS: the period's floor per task, nr * min_gran
SCHED_WAKEUP_GRANULARITY_NS = 1_000_000  # CFS: wakeup_preempt_entity's gran
SCHED_NR_LATENCY = 8  # CFS: sched_latency / min_granularity
SCHED_SCALE_MAX_CPUS = 8

# kernel/softirq.c
MAX_SOFTIRQ_TIME_MS = 2  # msecs_to_jiffies(2)
MAX_SOFTIRQ_RESTART = 10

# include/net/rps.h
RPS_NO_CPU = 0xFFFF
RPS_NO_FILTER = 0xFFFF
RPS_SOCK_FLOW_ENTRIES_MAX = 1 << 29  # larger writes get -EINVAL

# kernel/bpf/cpumap.c
CPU_MAP_BULK_SIZE = 8  # 8 == one cacheline on 64-bit archs
CPUMAP_BATCH = 8

# The model's truesize of a received packet (docs/model.md): max(min, len + overhead)
# bytes, charged to sk_rmem_alloc; a socket queue holds at most rcvbuf // min + 2.
SKB_TRUESIZE_MIN = 768
SKB_TRUESIZE_OVERHEAD = 320

# socket defaults: net.core.rmem_default on a stock x86-64 kernel (bytes)
RMEM_DEFAULT = 212992
