"""Flow limit: skb_flow_limit's per-CPU history of recent flows."""

import numpy as np

from rxlab.kernel.constants import FLOW_LIMIT_HISTORY, FLOW_LIMIT_HISTORY_2013
from rxlab.mechanisms.base import Array, Drop, Mechanism


def history_len(kernel) -> int:
    """Packets remembered per CPU: FLOW_LIMIT_HISTORY (1 << 7), or 256 in the 2013
    variant (kernel.flow_limit_variant)."""
    return FLOW_LIMIT_HISTORY_2013 if kernel.flow_limit_variant == "2013" else FLOW_LIMIT_HISTORY


def arrays(sc) -> tuple[Array, ...]:
    """Each CPU's struct sd_flow_limit: the history ring and the bucket counts."""
    ncpu, k = sc.host.cpus, sc.kernel
    return (Array("fl_history", np.int64, (ncpu, history_len(k))),
            Array("fl_buckets", np.int64, (ncpu, k.flow_limit_table_len)))


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
    arrays=arrays,
    sized_by="kernel.flow_limit_table_len",
    state_in="sd",
)
