"""Threaded NAPI (napi/DEV-ID kthreads) and threaded backlog NAPI (backlog_napi/N)."""

from rxlab.mechanisms.base import Event, Mechanism

NAPI_THREADS = Mechanism(
    name="napi_threads",
    kernel="napi_threaded_poll, napi_threaded_poll_loop, napi_thread_wait "
           "(net/core/dev.c, v5.12 29863d41bb6e; backlog threads v6.10 dad6b9770263)",
    code=("kernel/napi_thread.py", "kernel/wake.py"),
    events=(Event("NAPI_WAKE", "arg rx queue: wake_up_process(napi->thread) reaches the "
                               "thread's CPU"),),
    flags=("napi_threaded", "backlog_threads"),
    knobs=("nic.threaded", "nic.napi_thread_affinity", "kernel.thread_backlog_napi"),
    output=("tasks", "queues"),
)
