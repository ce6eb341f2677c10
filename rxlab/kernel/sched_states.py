"""States the CPU scheduler keeps (``rxlab.kernel.sched``): an application thread's,
cpumap kthread's, NAPI kthread's or the aRFS work item's, and what a CPU's current
segment runs.
"""

# --- thread states --------------------------------------------------------------------
TH_SLEEP, TH_WAKING, TH_RUNNABLE = 0, 1, 2

# --- CPU segment kinds ----------------------------------------------------------------
SEG_NONE, SEG_NAPI, SEG_APP, SEG_CPUMAP, SEG_KWORKER, SEG_NAPI_THREAD = 0, 1, 2, 3, 4, 5

# --- who runs a pending softirq at its local_bh_enable (SOFTNET_DATA bh_inline) --------
BH_NONE, BH_APP, BH_NAPI_THREAD = 0, 1, 2  # the task is SOFTNET_DATA bh_task

# --- the aRFS service task / work item (ArfsState.glob svc_pending) ---------------
SVC_IDLE, SVC_QUEUED, SVC_RUNNABLE = 0, 1, 2
