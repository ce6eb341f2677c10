"""RFS: rps_sock_flow_table, the per-queue rps_dev_flow tables, set_rps_cpu."""

from rxlab.mechanisms.base import Counter, Mechanism

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
)
