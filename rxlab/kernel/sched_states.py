"""States the CPU scheduler keeps (``rxlab.kernel.sched``): an application thread's,
cpumap kthread's, NAPI kthread's or the aRFS work item's, and what a CPU's current
segment runs.
"""

# --- thread states --------------------------------------------------------------------
TH_SLEEP, TH_WAKING, TH_RUNNABLE = 0, 1, 2

# --- CPU segment kinds ----------------------------------------------------------------
SEG_NONE, SEG_NAPI, SEG_APP, SEG_CPUMAP, SEG_KWORKER, SEG_NAPI_THREAD = 0, 1, 2, 3, 4, 5
# a thread's busy loop: one of its polls (SEG_BUSY_POLL), or its spin between polls
# (SEG_BUSY_SPIN: no event pending; an arrival, a delivery, its timeout or an interrupt
# kicks the CPU)
SEG_BUSY_POLL, SEG_BUSY_SPIN = 6, 7

# --- who runs a NAPI poll (rx_loop.dispatch, POLL_PAUSE thread) -------------------------
POLL_SOFTIRQ, POLL_KTHREAD, POLL_BUSY = 0, 1, 2

# --- a thread's busy loop (APP_THREAD th_bp) -------------------------------------------
BP_OFF, BP_LOOP, BP_STOP = 0, 1, 2  # BP_STOP: busy_poll_stop's last poll is next

# --- who runs a pending softirq at its local_bh_enable (SOFTNET_DATA bh_inline) --------
BH_NONE, BH_APP, BH_NAPI_THREAD = 0, 1, 2  # the task is SOFTNET_DATA bh_task

# --- the aRFS service task / work item (ArfsState.glob svc_pending) ---------------
SVC_IDLE, SVC_QUEUED, SVC_RUNNABLE = 0, 1, 2
