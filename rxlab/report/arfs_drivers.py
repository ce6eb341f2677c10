"""The aRFS filter paths of ice and mlx5 as the drivers run them (``rxlab explain arfs``).

Each step names the kernel function it comes from and what rxlab's model
(``nic.arfs.model``; rxlab/nic/arfs_steer.py, rxlab/nic/arfs.py) does for it.
"""

from __future__ import annotations

ICE = "drivers/net/ethernet/intel/ice/ice_arfs.c"
MLX5 = "drivers/net/ethernet/mellanox/mlx5/core/en_arfs.c"

DRIVERS = [
    {
        "driver": "ice",
        "models": ["ice-hash-match", "ice-tuple-match"],
        "table": "one hash list per VSI, vsi->arfs_fltr_list[ICE_MAX_ARFS_LIST = 1024]; "
                 "bucket = skb_get_hash_raw(skb) & ICE_ARFS_LST_MASK",
        "lock": "vsi->arfs_lock (spin_lock_bh), one per VSI: taken by every CPU whose RFS "
                "decision calls ndo_rx_flow_steer, and by the service task's sync",
        "steps": [
            ("lookup", f"{ICE} ice_rx_flow_steer",
             "walks the bucket for an entry with the same flow_id; before the 2025 'ice: "
             "Perform accurate aRFS flow match' fix flow_id alone matches, after it the "
             "5-tuple must match too",
             "ice-hash-match / ice-tuple-match; the call spins for arfs_lock (softirq time) "
             "until it is free, then holds it for arfs_steer"),
            ("skip", f"{ICE} ice_rx_flow_steer",
             "entry found and already on rxq_idx, or not yet ACTIVE (its programming is "
             "pending): returns its fltr_id, nothing changes",
             "counted as arfs skip"),
            ("update", f"{ICE} ice_rx_flow_steer",
             "entry ACTIVE on another queue: q_index = rxq_idx, state INACTIVE, active "
             "counter down (ice_arfs_update_active_fltr_cntrs), ice_service_task_schedule()",
             "counted as arfs update; with flow_id matching, a colliding flow re-points "
             "the other flow's filter"),
            ("add", f"{ICE} ice_arfs_build_entry",
             "no entry: devm_kzalloc(GFP_ATOMIC), fltr_id = ++arfs_last_fltr_id % "
             "RPS_NO_FILTER, added INACTIVE at the bucket's head; service task scheduled",
             "counted as arfs add; a failed allocation returns -ENOMEM (no filter)"),
            ("program", f"{ICE} ice_sync_arfs_fltrs, ice_arfs_update_flow_rules",
             "service task: under arfs_lock walks all 1024 lists, INACTIVE -> ACTIVE onto "
             "an add list, expired ACTIVE entries onto a delete list; outside the lock "
             "ice_fdir_write_fltr writes (or removes) each Flow Director filter",
             "a kworker on the CPU that queued the task (ice_wq), woken nic.arfs.delay_us "
             "later, scheduled against the CPU's threads by runtime and never inside a "
             "softirq; each run spins for arfs_lock, holds it for 1024 x arfs_sync_bucket "
             "+ entries x arfs_sync_entry while it walks, then writes the deletes and adds, "
             "arfs_program each, all as system time on that CPU; requests during a run "
             "wait for the next trigger"),
            ("expire", f"{ICE} ice_arfs_is_flow_expired",
             "rps_may_expire_flow() says the flow left its RFS slot; UDP entries also "
             "expire 5 s after activation",
             "checked in every run's walk (a request's, or the nic.arfs.period_s service "
             "timer's: 1 s)"),
        ],
    },
    {
        "driver": "mlx5",
        "models": ["mlx5"],
        "table": "4 flow tables (IPv4/IPv6 x TCP/UDP) of ARFS_HASH_SIZE = 256 buckets; "
                 "bucket = hash_long(sport | dport << 2, ARFS_HASH_SHIFT)",
        "lock": "the netdev's arfs_lock (spin_lock_bh), one per device; the firmware "
                "commands run later under priv->state_lock (a mutex) in the work item",
        "steps": [
            ("lookup", f"{MLX5} mlx5e_rx_flow_steer, arfs_find_rule",
             "the rule whose ports and addresses equal the packet's (a full 5-tuple "
             "match: no collisions between flows)",
             "mlx5; the call spins for arfs_lock, then holds it for arfs_steer"),
            ("skip", f"{MLX5} mlx5e_rx_flow_steer",
             "rule found on rxq_index, or its work item busy (work_busy): returns its "
             "filter_id", "counted as arfs skip"),
            ("update", f"{MLX5} mlx5e_rx_flow_steer",
             "rule found on another queue, its work idle: rule->rxq = rxq_index, "
             "queue_work()",
             "counted as arfs update"),
            ("add", f"{MLX5} arfs_alloc_rule",
             "no rule: kzalloc(GFP_ATOMIC), filter_id = last_filter_id++ % RPS_NO_FILTER, "
             "added to its bucket, queue_work() on the single-threaded 'mlx5e_arfs' "
             "workqueue", "counted as arfs add"),
            ("program", f"{MLX5} arfs_handle_work",
             "arfs_add_rule (mlx5_add_flow_rules) for a new rule or arfs_modify_rule_rq "
             "(mlx5_modify_rule_destination) for a moved one: firmware commands",
             "a kworker on the CPU that queued the work (the ordered, unbound mlx5e_arfs "
             "queue: wq_select_unbound_cpu's local CPU), woken nic.arfs.delay_us later, "
             "scheduled by runtime, never inside a softirq; arfs_program per rule as "
             "system time on that CPU; work queued meanwhile runs next"),
            ("expire", f"{MLX5} arfs_may_expire_flow",
             "after each work item: under arfs_lock collects rules with no pending work "
             "that rps_may_expire_flow() lets go, at most 62 per scan (quota 60, "
             "post-increment test), deleted outside the lock",
             "after each work item's write, on the kworker: spins for arfs_lock, holds it "
             "for the buckets (arfs_sync_bucket) and rules (arfs_sync_entry) it visits, "
             "all of them when fewer than 62 may go; the deletions (arfs_program each) "
             "follow; no timer (nic.arfs.period_s is ice's)"),
        ],
    },
]


def print_drivers(console) -> None:
    from rxlab.report.fit import print_wrapped

    for d in DRIVERS:
        console.print(f"[bold]{d['driver']}[/bold] (nic.arfs.model: {', '.join(d['models'])})",
                      highlight=False)
        print_wrapped(console, d["table"], "  table: ")
        print_wrapped(console, d["lock"], "  lock:  ")
        for name, where, kernel, model in d["steps"]:
            print_wrapped(console, kernel, f"  {name:8s}")
            print_wrapped(console, f"{where}; rxlab: {model}", " " * 10, style="dim")


def as_json() -> list[dict]:
    return [{**{k: v for k, v in d.items() if k != "steps"},
             "steps": [{"step": s, "kernel": w, "does": k, "rxlab": m}
                       for s, w, k, m in d["steps"]]} for d in DRIVERS]
