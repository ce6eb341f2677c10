"""What a CPU runs next: pending softirq work, then the fair class's choice of task.

A softirq raised on a CPU runs at once on the way out of the interrupt or at
``local_bh_enable`` (inline, ``T_SOFTIRQ``), ahead of any task. Once
``handle_softirqs`` has deferred the work to ``ksoftirqd/<cpu>``, that thread is a
nice-0 task of the fair class like the application threads, the cpumap kthread, the
kworker running the driver's aRFS work (``rxlab.nic.arfs``) and the NAPI kthreads of
threaded NAPI (``rxlab.kernel.napi_thread``): the candidates in ``THREADS``, each with
its vruntime (equal weights: the CPU time it ran). A mechanism that adds a kernel
thread adds a constant here and a branch in ``_candidate``.

The rules are kernel/sched/fair.c's, by version (read in 6.1.55 for CFS, 6.18.2 for
EEVDF), with the tunables scaled by 1 + ilog2(min(ncpus, 8)) (``fair_class_params``):

- **slices**: the task holding the CPU keeps it while runnable until its slice is used
  up and a tick notices (no HRTICK), or a wake-up sets need_resched. EEVDF's slice is
  its request, the base slice (0.70 ms since v6.15, 0.75 ms in v6.6-v6.14); CFS's is
  ``sched_slice``: sched_latency (6 ms) shared by the runnable tasks, at least
  min_granularity (0.75 ms) each.
- **the pick**: the runnable task with the least vruntime (CFS's leftmost; for EEVDF's
  eligible task with the earliest virtual deadline a simplification: with equal
  slices the least vruntime is eligible and its deadline is rarely later; ties go to
  the earlier candidate in ``THREADS``).
- **wake-up placement** (``place_woken``): CFS credits a sleeper with at most half of
  sched_latency below min_vruntime; EEVDF places it at the average vruntime less the
  lag it had when it slept (``sleep_lag``).
- **wake-up preemption** (``wake_preempt``): CFS when the woken task is more than the
  wakeup granularity (1 ms) behind; EEVDF only when the running task's slice is used
  up or it is no longer eligible.

The NAPI kthreads of one CPU are one candidate (the one with the least vruntime of
them), as are its application threads (one vruntime, round robin among them).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.constants import (
    SCHED_BASE_SLICE_NS,
    SCHED_BASE_SLICE_NS_V66,
    SCHED_LATENCY_NS,
    SCHED_MIN_GRANULARITY_NS,
    SCHED_NR_LATENCY,
    SCHED_SCALE_MAX_CPUS,
    SCHED_WAKEUP_GRANULARITY_NS,
)
from rxlab.kernel.hashfn import ilog2
from rxlab.kernel.sched_states import SVC_RUNNABLE, TH_RUNNABLE

# Candidates, in the order that breaks a tie of runtimes.
SCHED_KSOFTIRQD = 0  # ksoftirqd/<cpu> with NET_RX work pending
SCHED_CPUMAP_KTHREAD = 1  # the cpumap entry's kthread on this CPU
SCHED_KWORKER = 2  # the kworker running the driver's aRFS work item on this CPU
SCHED_NAPI_THREAD = 3  # a queue's NAPI kthread napi/DEV-ID on this CPU (threaded NAPI)
SCHED_APP = 4  # the CPU's application threads (one runtime, round robin among them)
THREADS = 5
SCHED_SOFTIRQ = -2  # inline softirq: not a thread, runs before any of them
SCHED_IDLE = -1


def fair_class_params(kb, ncpu: int, jiffy_ns: int) -> dict:
    """The fair class's tunables as kernel/sched/fair.c sets them at boot: each default
    times 1 + ilog2(min(ncpus, 8)) (``update_sysctl``, SCHED_TUNABLESCALING_LOG)."""
    factor = 1 + ilog2(min(ncpu, SCHED_SCALE_MAX_CPUS))
    base = SCHED_BASE_SLICE_NS if kb.sched_slice_070 else SCHED_BASE_SLICE_NS_V66
    slice_ns = factor * (base if kb.sched_eevdf else SCHED_LATENCY_NS)
    return dict(sched_eevdf=kb.sched_eevdf, sched_slice_ns=slice_ns,
                sched_min_gran_ns=factor * SCHED_MIN_GRANULARITY_NS,
                sched_wakeup_gran_ns=factor * SCHED_WAKEUP_GRANULARITY_NS,
                sched_lag_limit_ns=max(2 * slice_ns, jiffy_ns))


@njit(**JIT_STATE)
def has_runnable_thread(s, c):
    """An application thread on CPU c is runnable."""
    so = s.so
    for k in range(so.cpu_nthreads[c]):
        if so.thread[so.cpu_threads[c, k]].th_state == TH_RUNNABLE:
            return True
    return False


@njit(**JIT_STATE)
def app_next(s, c):
    """The application thread CPU c runs next: round robin from ``rr`` over its runnable
    threads, wrapping by a subtraction (rr is past the end only after a migration shrank
    the list)."""
    sd, so = s.sd, s.so
    nth = so.cpu_nthreads[c]
    r = sd.cpu[c].rr if sd.cpu[c].rr < nth else sd.cpu[c].rr % max(nth, 1)
    for k in range(nth):
        i = r + k - nth if r + k >= nth else r + k
        cand = so.cpu_threads[c, i]
        if so.thread[cand].th_state == TH_RUNNABLE:
            sd.cpu[c].rr = 0 if i + 1 == nth else i + 1
            return cand
    return np.int64(-1)


@njit(**JIT_STATE)
def app_sleeps(s, c):
    """An application thread of CPU c is about to sleep: if it is the last runnable one,
    the CPU's application entity keeps its lag (``sleep_lag``)."""
    so, sd = s.so, s.sd
    n = 0
    for k in range(so.cpu_nthreads[c]):
        if so.thread[so.cpu_threads[c, k]].th_state == TH_RUNNABLE:
            n += 1
    if n == 1:
        sd.cpu[c].app_lag = sleep_lag(s, c, np.int64(SCHED_APP), sd.cpu[c].app_vrt)


@njit(**JIT_STATE)
def kthread_runnable(s, c):
    """The cpumap kthread of CPU c's entry is runnable."""
    e = s.p.cpu[c].cm_entry
    return e >= 0 and s.cm.entry[e].kt_state == TH_RUNNABLE


@njit(**JIT_STATE)
def kworker_runnable(s, c):
    """The aRFS work item is queued on CPU c's kworker, and no net_rx_action is under
    way there (ksoftirqd runs handle_softirqs with BH off: not preempted mid-way)."""
    g = s.ar.glob[0]
    return g.svc_pending == SVC_RUNNABLE and g.svc_cpu == c and s.sd.cpu[c].in_rx_action == 0


@njit(**JIT_STATE)
def napi_thread_next(s, c):
    """The runnable NAPI kthread on CPU c with the least vruntime: its NAPI id (an rx
    queue's napi/DEV-ID, or the CPU's backlog_napi/c at nq + c), or -1."""
    p, nt = s.p, s.nic.thread
    best = -1
    if p.napi_threaded:
        for q in range(p.nq):
            if (p.queue[q].napi_cpu == c and nt[q].nt_state == TH_RUNNABLE
                    and (best < 0 or nt[q].nt_vrt < nt[best].nt_vrt)):
                best = q
    b = p.nq + c
    if p.backlog_threaded and nt[b].nt_state == TH_RUNNABLE and (
            best < 0 or nt[b].nt_vrt < nt[best].nt_vrt):
        best = b
    return best


@njit(**JIT_STATE)
def _candidate(s, c, k):
    """(runnable, runtime) of candidate k on CPU c."""
    sd = s.sd
    if k == SCHED_KSOFTIRQD:
        soft = sd.cpu[c].softirq_pending or sd.cpu[c].in_rx_action
        return soft != 0 and sd.cpu[c].ksoftirqd != 0, sd.cpu[c].ks_vrt
    if k == SCHED_CPUMAP_KTHREAD:
        e = s.p.cpu[c].cm_entry
        if kthread_runnable(s, c):
            return True, s.cm.entry[e].kt_vrt
        return False, sd.cpu[c].app_vrt
    if k == SCHED_KWORKER:
        return kworker_runnable(s, c), sd.cpu[c].kw_vrt
    if k == SCHED_NAPI_THREAD:
        q = napi_thread_next(s, c)
        if q >= 0:
            return True, s.nic.thread[q].nt_vrt
        return False, sd.cpu[c].app_vrt
    return has_runnable_thread(s, c), sd.cpu[c].app_vrt


@njit(**JIT_STATE)
def fair_stats(s, c, skip):
    """(n, sum, least) of the vruntimes of CPU c's runnable tasks other than candidate
    ``skip`` (the running one included; -1 skips none)."""
    n = vsum = vmin = 0
    for k in range(THREADS):
        if k == skip:
            continue
        ok, v = _candidate(s, c, k)
        if ok:
            vmin = v if n == 0 else min(vmin, v)
            n += 1
            vsum += v
    return n, vsum, vmin


@njit(**JIT_STATE)
def slice_len(s, n):
    """The slice a task picked among n runnable ones gets: EEVDF's base slice (its
    request, ``update_deadline``), or CFS's ``sched_slice``: sched_latency shared by
    up to sched_nr_latency tasks, min_granularity each beyond."""
    p = s.p
    if p.sched_eevdf:
        return p.sched_slice_ns
    if n <= SCHED_NR_LATENCY:
        return p.sched_slice_ns // max(n, 1)
    return p.sched_min_gran_ns


@njit(**JIT_STATE)
def sleep_lag(s, c, k, v):
    """The lag candidate k of CPU c keeps as it goes to sleep (EEVDF
    ``update_entity_lag``): the average vruntime of the runnable tasks, it included,
    minus its own, within +-max(2 slices, a tick); CFS keeps none. Callers pass k as
    np.int64 (as to place_woken): one compiled copy, not one per literal candidate."""
    p = s.p
    if not p.sched_eevdf:
        return 0
    n, vsum, _ = fair_stats(s, c, np.int64(k))  # int64: one compiled copy, not one per literal
    lag = (vsum + v) // (n + 1) - v
    return min(max(lag, -p.sched_lag_limit_ns), p.sched_lag_limit_ns)


@njit(**JIT_STATE)
def place_woken(s, c, k, v, lag):
    """The vruntime candidate k gets as it wakes on CPU c (``place_entity``). CFS: no
    earlier than min_vruntime less half of sched_latency (GENTLE_FAIR_SLEEPERS), never
    later than its own. EEVDF (PLACE_LAG): the runnable tasks' average less its saved
    lag, scaled by (W + w) / W so that the lag survives its own weight joining the
    average; on an empty queue at min_vruntime."""
    p, sd = s.p, s.sd
    n, vsum, vmin = fair_stats(s, c, np.int64(k))
    if n:
        sd.cpu[c].min_vrt = max(sd.cpu[c].min_vrt, vmin)
    if not p.sched_eevdf:
        return max(v, sd.cpu[c].min_vrt - p.sched_slice_ns // 2)
    if n == 0:
        return sd.cpu[c].min_vrt
    if n == 1:
        return vsum - 2 * lag  # the common case, without two divisions
    return vsum // n - lag * (n + 1) // n


@njit(**JIT_STATE)
def wake_preempt(s, c, v):
    """A task placed at vruntime v has become runnable on CPU c: does it set
    need_resched for the running task (``check_preempt_wakeup`` / v6.6+
    ``check_preempt_wakeup_fair``)? The running task is switched at the end of its
    segment. CFS: when the woken task is more than wakeup_granularity behind. EEVDF:
    the enqueue's ``update_curr`` ends a used-up slice; otherwise the running task,
    protected for its slice (RUN_TO_PARITY), yields only once it is not eligible (its
    vruntime above the average), the woken task then being."""
    p, sd = s.p, s.sd
    cur = sd.cpu[c].cur_who
    if cur == SCHED_IDLE or sd.cpu[c].resched:
        return
    ok, vc = _candidate(s, c, cur)
    if not ok:
        return
    if not p.sched_eevdf:
        if vc - v > p.sched_wakeup_gran_ns:
            sd.cpu[c].resched = 1
        return
    if vc >= sd.cpu[c].cur_vend:
        sd.cpu[c].resched = 1
        return
    n, vsum, _ = fair_stats(s, c, np.int64(-1))
    if vc * n > vsum:
        sd.cpu[c].resched = 1


@njit(**JIT_STATE)
def slice_over(s, c, t):
    """The task holding CPU c is to be switched at t: a wake-up set need_resched, or a
    tick since the CPU's previous decision found its slice used up (``entity_tick`` ->
    ``update_curr``: ``update_deadline`` for EEVDF, ``check_preempt_tick`` for CFS;
    HRTICK is off, so nothing notices the slice's end between ticks)."""
    sd = s.sd
    if sd.cpu[c].resched:
        return True
    if t < sd.cpu[c].disp_jend:
        return False  # no tick since the previous decision
    return _candidate(s, c, sd.cpu[c].cur_who)[1] >= sd.cpu[c].cur_vend


@njit(**JIT_STATE)
def need_resched(s, c, t):
    """need_resched() for the softirq running on CPU c at t (handle_softirqs stops
    restarting): from idle, or over a task that sleeps, any task woken meanwhile;
    over a running task, the wake-up preemption or used-up slice that sets it."""
    sd = s.sd
    cur = sd.cpu[c].cur_who
    if cur == SCHED_IDLE or not _candidate(s, c, cur)[0]:
        for k in range(SCHED_KSOFTIRQD + 1, THREADS):
            if _candidate(s, c, k)[0]:
                return True
        return False
    return slice_over(s, c, t)


@njit(**JIT_STATE)
def pick_next(s, c, t):
    """What CPU c runs next at t. A raised softirq runs first (inline); ksoftirqd inside
    net_rx_action keeps the CPU (BH is off). Otherwise the task holding the CPU keeps
    it while runnable, until ``slice_over``; then ``__schedule`` picks the runnable
    task with the least vruntime and gives it a new slice (``slice_len``)."""
    sd = s.sd
    if (sd.cpu[c].softirq_pending or sd.cpu[c].in_rx_action) and not sd.cpu[c].ksoftirqd:
        return SCHED_SOFTIRQ
    if sd.cpu[c].in_rx_action:
        # ksoftirqd is inside handle_softirqs -> net_rx_action with BH off: no thread
        # runs until it returns (its cond_resched comes after)
        return SCHED_KSOFTIRQD
    cur = sd.cpu[c].cur_who
    keep = (cur != SCHED_IDLE and _candidate(s, c, cur)[0] and not slice_over(s, c, t))
    if t >= sd.cpu[c].disp_jend:  # a new jiffy: its end, by one division per jiffy
        sd.cpu[c].disp_jend = (t // s.p.jiffy_ns + 1) * s.p.jiffy_ns
    if keep:
        return cur
    n, best, bv = 0, SCHED_IDLE, np.int64(0)
    for k in range(THREADS):
        ok, v = _candidate(s, c, k)
        if ok:
            n += 1
            if best == SCHED_IDLE or v < bv:
                best, bv = k, v
    sd.cpu[c].resched = 0
    sd.cpu[c].cur_who = best
    if n:
        sd.cpu[c].min_vrt = max(sd.cpu[c].min_vrt, bv)  # update_min_vruntime
        sd.cpu[c].cur_vend = bv + slice_len(s, np.int64(n))
    return best
