"""RPS: get_rps_cpu's plain branch, the per-CPU backlog and the RPS IPI."""

from rxlab.mechanisms.base import Drop, Event, Mechanism, Stage

RPS = Mechanism(
    name="rps",
    kernel="get_rps_cpu, enqueue_to_backlog, napi_schedule_rps, net_rps_send_ipi, "
           "process_backlog (net/core/dev.c)",
    code=("kernel/rps.py", "kernel/backlog.py"),
    stages=(
        Stage("rps_enqueue", "enqueue_to_backlog (net/core/dev.c): the target's "
                             "input_pkt_queue under its lock", per_packet=True),
        Stage("ipi_send", "net_rps_send_ipi -> smp_call_function_single_async "
                          "(net/core/dev.c, kernel/smp.c)"),
        Stage("ipi_latency", "the IPI's delivery to the target CPU (interrupt controller)"),
        Stage("ipi_recv", "the IPI's handler on its target, as irq time: "
                          "rps_trigger_softirq (net/core/dev.c), sched_ttwu_pending "
                          "(kernel/sched/core.c)"),
    ),
    drops=(Drop("backlog", "enqueue_to_backlog: qlen > netdev_max_backlog "
                           "(SKB_DROP_REASON_CPU_BACKLOG, softnet_stat dropped)"),),
    events=(Event("IPI", "arg CPU: an RPS IPI reaches it (rps_trigger_softirq)"),),
    flags=("backlog_head_batched",),
    knobs=("kernel.rps_cpus", "kernel.netdev_max_backlog", "kernel.dev_weight"),
    output=("softnet_stat", "cpus"),
)
