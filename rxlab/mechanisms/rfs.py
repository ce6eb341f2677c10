"""RFS: rps_sock_flow_table, the per-queue rps_dev_flow tables, set_rps_cpu."""

import numpy as np

from rxlab.kernel.hashfn import ilog2, roundup_pow_of_two
from rxlab.kernel.state import RPS_DEV_FLOW
from rxlab.mechanisms.base import Array, Counter, Mechanism


def table_sizes(sc) -> tuple[int, np.ndarray]:
    """(rps_sock_flow_entries rounded up to a power of two as rps_sock_flow_sysctl does,
    or 0; log2 of each queue's rps_flow_cnt rounded the same way, or 0: no table)."""
    k, nq = sc.kernel, sc.nic.queues
    n = k.rps_sock_flow_entries
    entries = roundup_pow_of_two(n) if n else 0
    cnts = [k.rps_flow_cnt] * nq
    if isinstance(k.rps_flow_cnt, dict):
        cnts = [k.rps_flow_cnt.get(q, 0) for q in range(nq)]
    logs = np.array([ilog2(roundup_pow_of_two(c)) if c else 0 for c in cnts], np.int64)
    return entries, logs


def arrays(sc) -> tuple[Array, ...]:
    """rps_sock_flow_table and every queue's rps_dev_flow table, stored at the largest
    queue's size."""
    entries, logs = table_sizes(sc)
    size = 1 << int(logs.max()) if logs.any() else 1
    nq = sc.nic.queues
    return (Array("sock_flow", np.int64, (max(entries, 1),)),
            Array("dev", RPS_DEV_FLOW, (nq, size)), Array("dev_log", np.int64, (nq,)))


RFS = Mechanism(
    name="rfs",
    kernel="get_rps_cpu's RFS branch, set_rps_cpu, rps_record_sock_flow "
           "(net/core/dev.c, include/net/rps.h), store_rps_dev_flow_table_cnt "
           "(net/core/net-sysfs.c)",
    code=("kernel/rfs.py", "kernel/rps.py"),
    counters=(
        Counter("rfs_steered", "packets get_rps_cpu sent by an rps_dev_flow entry"),
        Counter("rfs_moves", "entries moved to the consumer's new CPU (set_rps_cpu)"),
        Counter("rfs_held", "moves held back while the old CPU's backlog still held the "
                            "flow's packets (input_queue_head before last_qtail)"),
        Counter("arfs_calls", "ndo_rx_flow_steer calls (CONFIG_RFS_ACCEL)"),
    ),
    flags=("rfs_hash32", "rps_dev_flow_hash", "rps_flow_cnt_limit"),
    knobs=("kernel.rps_sock_flow_entries", "kernel.rps_flow_cnt", "apps[].connected"),
    output=("rfs",),
    arrays=arrays,
    sized_by="kernel.rps_flow_cnt",
    state_in="rf",
)
