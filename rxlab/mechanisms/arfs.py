"""aRFS: ndo_rx_flow_steer, the driver's filter list and lock, its service work."""

from rxlab.mechanisms.base import Counter, Event, Mechanism, Stage

ARFS = Mechanism(
    name="arfs",
    kernel="ice_rx_flow_steer, ice_sync_arfs_fltrs, ice_service_task "
           "(drivers/net/ethernet/intel/ice/ice_arfs.c, ice_main.c); mlx5e_rx_flow_steer, "
           "arfs_handle_work (drivers/net/ethernet/mellanox/mlx5/core/en_arfs.c); "
           "rps_may_expire_flow (net/core/dev.c)",
    code=("nic/arfs.py", "nic/arfs_steer.py"),
    stages=(
        Stage("arfs_steer", "ndo_rx_flow_steer (ice_rx_flow_steer, mlx5e_rx_flow_steer): "
                            "the filter lookup under arfs_lock and queue_work"),
        Stage("arfs_program", "one filter written to the NIC by the service work "
                              "(ice_arfs_add_flow_fltr's ice_fdir_write_fltr, mlx5 "
                              "arfs_add_rule)"),
        Stage("arfs_sync_entry", "ice_sync_arfs_fltrs: one filter examined under arfs_lock"),
        Stage("arfs_sync_bucket", "ice_sync_arfs_fltrs: one hash bucket walked under "
                                  "arfs_lock"),
    ),
    events=(
        Event("ARFS_SVC", "arg CPU: the kworker queued the aRFS work wakes there "
                          "(runnable)"),
        Event("ARFS_TIMER", "the ice service timer: queues the work with an expiry scan"),
    ),
    counters=(
        Counter("arfs_add", "filters added (ice arfs_fltr_cntrs active_*_cnt increments; "
                            "mlx5 arfs_alloc_rule)"),
        Counter("arfs_update", "filters re-aimed at another queue"),
        Counter("arfs_skip", "calls that left a filter as it was (same queue, or still "
                             "being programmed)"),
        Counter("arfs_expire", "filters removed by rps_may_expire_flow"),
        Counter("arfs_avoided", "calls that found another flow's entry with the same "
                                "flow_id and did not take it (ice tuple match)"),
        Counter("arfs_hw_full", "programming refused: the NIC's filter table was full"),
        Counter("arfs_programmed", "filters written to the NIC"),
        Counter("arfs_no_memory", "calls refused for want of a free entry (-ENOMEM)"),
        Counter("arfs_lock_contended", "acquisitions of the filter lock that found it held"),
        Counter("arfs_lock_wait_ns", "softirqs' spin on the filter lock (ns)"),
        Counter("arfs_sync_runs", "service-task sync runs (ice_sync_arfs_fltrs; mlx5 work "
                                  "items)"),
        Counter("arfs_sync_wait_ns", "the service task's spin on the lock (ns)"),
        Counter("arfs_sync_hold_ns", "the service task's hold of the lock (ns)"),
    ),
    knobs=("nic.arfs",),
    output=("arfs",),
)
