"""The fair class the model's tasks share a CPU by (rxlab.kernel.sched), against
kernel/sched/fair.c: CFS as in 6.1 (sched_slice, sleeper credit, wake-up
granularity), EEVDF as in 6.18 (base slice, lag placement, RUN_TO_PARITY), the
tunables scaled by 1 + ilog2(min(ncpus, 8)) and slice ends noticed at the tick.

Each check sets a CPU's tasks by hand (an application thread and ksoftirqd/1, equal
nice-0 weights) and asks the scheduling functions what the kernel would do.
"""

from __future__ import annotations

import pytest
from support.compiled_calls import need_resched, pick_next, place_woken, sleep_lag, wake_preempt
from support.rfs_harness import Harness, rfs_dict

from rxlab.kernel.sched import SCHED_APP, SCHED_IDLE, SCHED_KSOFTIRQD
from rxlab.kernel.sched_states import TH_RUNNABLE, TH_SLEEP

MS = 1_000_000
C = 1


def host(version: str, cpus: int = 2, hz: int = 250) -> Harness:
    h = Harness(rfs_dict(cpus=cpus, version=version, host={"hz": hz}))
    h.reset()
    return h


def app_runnable(h: Harness, on: bool = True) -> None:
    th = int(h.m.so.cpu_threads[C, 0])
    h.m.so.thread["th_state"][th] = TH_RUNNABLE if on else TH_SLEEP


def ksoftirqd_runnable(h: Harness, on: bool = True) -> None:
    cpu = h.sd.cpu
    cpu["softirq_pending"][C] = int(on)
    cpu["ksoftirqd"][C] = int(on)


@pytest.mark.parametrize(("version", "cpus", "slice_ns"), [
    ("6.18", 2, 1_400_000),  # 0.70 ms x (1 + ilog2(2)), 2ae891b82695 (v6.15)
    ("6.18", 1, 700_000),
    ("6.18", 144, 2_800_000),  # the factor stops at 8 CPUs
    ("6.10", 2, 1_500_000),  # 0.75 ms x 2 before v6.15
    ("6.1", 2, 12_000_000),  # CFS: sched_latency 6 ms x 2
])
def test_tunables_scale_with_the_cpu_count_as_update_sysctl_does(version, cpus, slice_ns):
    p = host(version, cpus).p
    assert p.sched_slice_ns == slice_ns
    assert p.sched_eevdf == (version != "6.1")
    if version == "6.1":
        assert p.sched_min_gran_ns == 1_500_000 and p.sched_wakeup_gran_ns == 2 * MS


@pytest.mark.parametrize("version", ["6.18", "6.1"])
def test_the_running_task_keeps_the_cpu_until_a_tick_finds_its_slice_used(version):
    h = host(version)
    app_runnable(h)
    ksoftirqd_runnable(h)
    cpu = h.sd.cpu
    cpu["app_vrt"][C], cpu["ks_vrt"][C] = 10 * MS, 10 * MS + 1
    assert pick_next(h.s, C, 0) == SCHED_APP  # the least vruntime
    slice_ns = h.p.sched_slice_ns // (1 if h.p.sched_eevdf else 2)  # CFS: 2 tasks share it
    assert int(cpu["cur_vend"][C]) == 10 * MS + slice_ns
    cpu["app_vrt"][C] += slice_ns + 1  # used up between two ticks: nobody notices
    assert pick_next(h.s, C, 3 * MS) == SCHED_APP
    assert pick_next(h.s, C, 4 * MS) == SCHED_KSOFTIRQD  # the tick at 4 ms (HZ 250)
    assert int(cpu["cur_vend"][C]) == 10 * MS + 1 + slice_ns  # its own new slice


def test_a_sleeping_task_gives_the_cpu_up_at_once():
    h = host("6.18")
    app_runnable(h)
    ksoftirqd_runnable(h)
    assert pick_next(h.s, C, 0) == SCHED_KSOFTIRQD  # both at 0: the earlier candidate
    ksoftirqd_runnable(h, False)
    assert pick_next(h.s, C, 1000) == SCHED_APP
    app_runnable(h, False)
    assert pick_next(h.s, C, 2000) == SCHED_IDLE
    assert int(h.sd.cpu["cur_who"][C]) == SCHED_IDLE


def test_cfs_credits_a_sleeper_half_the_latency_below_min_vruntime():
    h = host("6.1")
    ksoftirqd_runnable(h)
    h.sd.cpu["ks_vrt"][C] = 50 * MS
    # min_vruntime follows the runnable task: 50 ms; credit sched_latency / 2 = 6 ms
    assert place_woken(h.s, C, SCHED_APP, 0, 0) == 44 * MS
    assert place_woken(h.s, C, SCHED_APP, 47 * MS, 0) == 47 * MS  # never moved back
    # the woken task is 6 ms behind, more than the 2 ms wake-up granularity: preempts
    h.sd.cpu["cur_who"][C] = SCHED_KSOFTIRQD
    h.sd.cpu["cur_vend"][C] = 56 * MS
    wake_preempt(h.s, C, 44 * MS)
    assert h.sd.cpu["resched"][C] == 1
    h.sd.cpu["resched"][C] = 0
    wake_preempt(h.s, C, 49 * MS)  # 1 ms behind: within the granularity
    assert h.sd.cpu["resched"][C] == 0


def test_eevdf_places_a_sleeper_at_the_average_less_its_lag():
    h = host("6.18")
    ksoftirqd_runnable(h)
    h.sd.cpu["ks_vrt"][C] = 50 * MS
    assert place_woken(h.s, C, SCHED_APP, 0, 0) == 50 * MS  # no lag: at the average
    # a lag of 0.5 ms, inflated by (W + w) / W = 2 as its own weight joins the average
    assert place_woken(h.s, C, SCHED_APP, 0, MS // 2) == 49 * MS
    ksoftirqd_runnable(h, False)
    h.sd.cpu["min_vrt"][C] = 30 * MS
    assert place_woken(h.s, C, SCHED_APP, 0, MS // 2) == 30 * MS  # empty queue: no lag


def test_eevdf_lag_at_sleep_is_clamped_to_two_slices():
    h = host("6.18")  # slice 1.4 ms
    ksoftirqd_runnable(h)
    h.sd.cpu["ks_vrt"][C] = 50 * MS
    assert sleep_lag(h.s, C, SCHED_APP, 49 * MS) == MS // 2  # avg 49.5 ms - 49 ms
    limit = max(2 * 1_400_000, 4 * MS)  # max(2 * slice, TICK_NSEC) at HZ 250
    assert sleep_lag(h.s, C, SCHED_APP, 0) == limit
    assert sleep_lag(h.s, C, SCHED_APP, 100 * MS) == -limit
    assert sleep_lag(host("6.1").s, C, SCHED_APP, 0) == 0  # CFS keeps no lag


def test_eevdf_protects_the_running_task_for_its_slice_while_it_is_eligible():
    h = host("6.18")
    app_runnable(h)
    ksoftirqd_runnable(h)
    cpu = h.sd.cpu
    cpu["app_vrt"][C], cpu["ks_vrt"][C] = 10 * MS, 10 * MS
    assert pick_next(h.s, C, 0) == SCHED_KSOFTIRQD
    wake_preempt(h.s, C, 10 * MS)  # running task eligible (at the average): protected
    assert cpu["resched"][C] == 0
    assert not need_resched(h.s, C, 1000)
    cpu["app_vrt"][C] = 9 * MS  # the woken task sits below: the running one is not eligible
    wake_preempt(h.s, C, 9 * MS)
    assert cpu["resched"][C] == 1
    assert need_resched(h.s, C, 1000)  # a softirq running now stops restarting
    assert pick_next(h.s, C, 1000) == SCHED_APP


def test_eevdf_a_wake_up_ends_a_used_up_slice_without_waiting_for_the_tick():
    h = host("6.18")
    app_runnable(h)
    ksoftirqd_runnable(h)
    cpu = h.sd.cpu
    cpu["app_vrt"][C], cpu["ks_vrt"][C] = 20 * MS, 10 * MS
    assert pick_next(h.s, C, 0) == SCHED_KSOFTIRQD
    cpu["ks_vrt"][C] = 10 * MS + 1_400_000  # its request is served
    assert not need_resched(h.s, C, 1000)  # no tick yet
    wake_preempt(h.s, C, 20 * MS)  # an enqueue's update_curr notices
    assert cpu["resched"][C] == 1
