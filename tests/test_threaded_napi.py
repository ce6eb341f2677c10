"""Threaded NAPI (net/core/dev.c napi_threaded_poll, 5.12+; docs/model.md, "Where the
receive work runs"): the device's polls run in a kthread napi/DEV-ID, a scheduled task,
instead of in softirq, so a reader on the same CPU no longer runs the receive work in its
own recv() and keeps what CFS gives it.

The flood of ``test_softirq_inline`` on the veth-like device in NAPI mode: its interrupt
on CPU 0, the NAPI kthread pinned to CPU 1, every packet's stack work (``stack_rx``)
done in that poll; CPU 1 can do a quarter of the flood. No cost is set from the real
kernel's figures (a same-CPU reader delivered 69-71 % of a flood with threaded NAPI on
the receiving veth, 6.18): that comparison is kernel-check's ``reader_threaded_napi``.
"""

from __future__ import annotations

import pytest

from rxlab.cli.main import main
from rxlab.kcheck import model

FLOOD_PPS = 200_000
STACK_RX_NS = 20_000


def scenario(app_cpu: int, *, threaded: bool = True, kernel: str = "6.18", user_ns: int = 0,
             rps: str | None = None, thread_cpu: int = 1) -> dict:
    d = model.scenario([model.group("flood", list(range(40000, 40016)), FLOOD_PPS)],
                       {"rps_cpus": rps} if rps else {}, app_cpu=app_cpu, duration=0.5,
                       costs={"stack_rx": STACK_RX_NS})
    d["host"]["kernel"] = kernel
    d["nic"]["rx_mode"] = "napi"
    if threaded:
        d["nic"]["threaded"] = True
        d["nic"]["napi_thread_affinity"] = [thread_cpu]
    d["apps"][0]["rcvbuf"] = 212992  # net.core.rmem_default
    d["apps"][0]["cost"] = {"user_ns": user_ns}
    d["drain"] = 0.0
    return d


def delivered_share(res) -> float:
    pk = res.data["packets"]
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]
    return pk["delivered"] / pk["offered"]


def test_a_reader_beside_the_napi_kthread_is_not_starved():
    same, other = model.simulate(scenario(1)), model.simulate(scenario(0))
    assert delivered_share(other) > 0.2  # the kthread's CPU: a quarter of the flood
    assert delivered_share(same) > 0.9 * delivered_share(other)
    cpu1 = same.data["cpus"][1]["util"]
    assert cpu1["softirq"] < 0.01  # no NET_RX softirq: the poll is the kthread's
    assert cpu1["system"] > 0.97  # the kthread (and the reader's recv) is system time
    q = same.data["queues"][0]
    assert q["napi_thread_cpu"] == 1
    # the kthread's own CPU time: nearly all of CPU 1 over the flood
    assert q["napi_thread_cpu_s"] > 0.9 * 0.5 * (1 - cpu1["idle"]) - 0.05
    # what it could not take in time overflowed the ring: drops at the device, not the socket
    drops = same.data["packets"]["dropped_by_reason"]
    assert drops["ring_full"] > 0 and drops["socket_rcvbuf"] == 0


def test_the_same_flood_in_softirq_starves_the_same_cpu_reader():
    """Without threaded NAPI, RPS to CPU 1 (the backlog's softirq) and a reader there:
    the reader's recv() runs the softirq inline (6.18), as test_softirq_inline shows."""
    thr = delivered_share(model.simulate(scenario(1)))
    soft = delivered_share(model.simulate(scenario(1, threaded=False, rps="2")))
    assert soft < 0.05 * thr


def test_a_cpu_hungry_reader_and_the_kthread_share_the_cpu_as_two_tasks():
    res = model.simulate(scenario(1, user_ns=50_000))
    cpu1 = res.data["cpus"][1]["util"]
    thread = res.data["queues"][0]["napi_thread_cpu_s"] / 0.5
    assert 0.4 < thread < 0.6
    assert 0.4 < cpu1["user"] + cpu1["system"] - thread < 0.6


def test_rps_from_the_kthread_runs_the_local_backlog_at_its_local_bh_enable():
    """RPS to the kthread's own CPU: the poll queues to the local backlog, and the pass's
    local_bh_enable runs NET_RX inline (softirq time on CPU 1, no ksoftirqd needed)."""
    res = model.simulate(scenario(0, rps="2"))
    cpu1 = res.data["cpus"][1]["util"]
    assert cpu1["softirq"] > 0.5
    assert res.data["cpus"][1]["softnet_stat"]["processed"] > 0
    assert res.data["cpus"][0]["softnet_stat"]["processed"] == 0


def test_the_kthread_on_another_cpu_than_the_interrupt_is_woken_across_cpus():
    d = scenario(0, thread_cpu=1)
    d["traffic"]["groups"][0]["rate"]["pps"] = 20_000  # light: the kthread sleeps between
    res = model.simulate(d)
    assert delivered_share(res) > 0.99
    assert res.data["cpus"][0]["util"]["irq"] > 0  # the interrupt and its wake-up IPI
    assert res.data["cpus"][1]["util"]["system"] > 0.3  # the kthread's polls


def test_same_scenario_same_result():
    a, b = model.simulate(scenario(1)), model.simulate(scenario(1))
    assert a.data["packets"] == b.data["packets"]
    assert a.data["cpus"] == b.data["cpus"]


@pytest.mark.parametrize("sets, words", [
    (["nic.threaded=true", "host.kernel=5.10"], "nic.threaded: Linux 5.10 has no threaded NAPI"),
    (["nic.napi_thread_affinity=[1]"], "nic.napi_thread_affinity: the napi/DEV-ID kthreads"),
    (["nic.threaded=true", "nic.napi_thread_affinity=[0,9,0,0]"],
     "nic.napi_thread_affinity[1]: CPU 9 does not exist"),
])
def test_a_kernel_or_setting_without_threaded_napi_is_refused_in_one_line(capsys, sets, words):
    args = [a for s in sets for a in ("--set", s)]
    code = main(["run", "default", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and len(err.strip().splitlines()) == 1, err
