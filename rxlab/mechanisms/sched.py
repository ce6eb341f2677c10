"""Who runs on a CPU: softirq at irq exit, the fair class's tasks, wake-ups, migration."""

from rxlab.mechanisms.base import Event, Mechanism, Stage

SCHED = Mechanism(
    name="sched",
    kernel="pick_next_task_fair, entity_tick, place_entity, check_preempt_wakeup_fair "
           "(kernel/sched/fair.c, CFS before v6.6, EEVDF after), try_to_wake_up, "
           "ttwu_queue_wakelist (kernel/sched/core.c)",
    code=("kernel/sched.py", "kernel/wake.py"),
    stages=(
        Stage("wakeup_latency", "try_to_wake_up until the woken task runs: the IPI and "
                                "the switch (kernel/sched/core.c)"),
        Stage("wakeup_remote", "try_to_wake_up of a task on another CPU, the waker's "
                               "time: ttwu_queue_wakelist and its IPI, or the remote "
                               "runqueue lock (kernel/sched/core.c)"),
    ),
    events=(
        Event("CPU", "arg CPU: it finished its segment and chooses what to run next"),
        Event("WAKE", "arg thread: its wake-up reaches its CPU"),
        Event("MIGRATE", "arg thread: it moves to another CPU"),
    ),
    flags=("sched_eevdf", "sched_slice_070"),
    knobs=("apps[].cpus", "apps[].migrate"),
    output=("cpus", "tasks"),
)
