"""RPS: get_rps_cpu's plain branch, the per-CPU backlog and the RPS IPI."""

from rxlab.kernel.hashfn import roundup_pow_of_two
from rxlab.kernel.state import SKB
from rxlab.mechanisms.base import Array, Drop, Event, Mechanism, Stage


def backlog_capacity(kernel) -> int:
    """Slots of a CPU's backlog ring: input_pkt_queue (up to netdev_max_backlog + 1, the
    test is qlen > max) and process_queue (as many again, spliced), plus a batch, rounded
    up to a power of two (positions are masked)."""
    return roundup_pow_of_two(2 * (kernel.netdev_max_backlog + 1) + 8)


def arrays(sc) -> tuple[Array, ...]:
    """Each CPU's backlog ring of skbs (softnet_data's input_pkt_queue and process_queue)."""
    return (Array("bl", SKB, (sc.host.cpus, backlog_capacity(sc.kernel))),)


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
    arrays=arrays,
    sized_by="kernel.netdev_max_backlog",
    state_in="sd",
)
