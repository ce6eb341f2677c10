"""Every event kind of the receive-path loop, in one place.

An event is a ``kind`` and an ``arg`` in the calendar (``rxlab.engine.core``), at a
priority named after the context it models (``PRIO_*`` there); ``rx_loop.handle_event``
maps each kind to its mechanism. A new mechanism adds its kind here.
"""

EV_CPU = 1  # arg CPU: it finished its segment and chooses what to run next
EV_IRQ = 2  # arg rx queue: its interrupt reaches the queue's CPU
EV_IPI = 3  # arg CPU: an RPS IPI reaches it (rps_trigger_softirq)
EV_WAKE = 4  # arg thread: its wake-up reaches its CPU
EV_MIGRATE = 5  # arg thread: it moves to another CPU
EV_ARFS_SVC = 6  # arg CPU: the kworker queued the aRFS work wakes there (runnable)
EV_ARFS_TIMER = 7  # the ice service timer: queues the work with an expiry scan
EV_CPUMAP_WAKE = 8  # arg cpumap entry: wake_up_process(kthread) reaches its CPU
EV_NAPI_WAKE = 9  # arg rx queue: wake_up_process(napi->thread) reaches the thread's CPU
