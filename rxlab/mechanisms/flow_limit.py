"""Flow limit: skb_flow_limit's per-CPU history of recent flows."""

from rxlab.mechanisms.base import Drop, Mechanism

FLOW_LIMIT = Mechanism(
    name="flow_limit",
    kernel="skb_flow_limit (net/core/dev.c), flow_limit_cpu_sysctl and "
           "flow_limit_table_len_sysctl (net/core/sysctl_net_core.c)",
    code=("kernel/flow_limit.py",),
    drops=(Drop("flow_limit", "skb_flow_limit said drop (the kernel counts it as "
                              "CPU_BACKLOG, and in softnet_stat flow_limit_count)"),),
    flags=("flow_limit_hash_32",),
    knobs=("kernel.flow_limit_cpu_bitmap", "kernel.flow_limit_table_len",
           "kernel.flow_limit_variant"),
    output=("softnet_stat", "cpus"),
)
