"""Threaded backlog NAPI (boot parameter ``thread_backlog_napi``, net/core/dev.c,
dad6b9770263, v6.10; docs/model.md, "Where the receive work runs"): a CPU's backlog that
RPS schedules from another CPU runs in that CPU's ``backlog_napi/N`` thread, woken
directly by the enqueuing CPU (``napi_schedule_rps``: ``__napi_schedule_irqoff``)
instead of by an RPS IPI and a NET_RX softirq.

The flood of ``test_softirq_inline``: 200 Kpps steered by RPS from CPU 0 to CPU 1, whose
per-packet cost lets it handle a quarter of it. No cost is set from a real kernel's
figures; what is checked is where the work runs and what the same-CPU reader gets.
"""

from __future__ import annotations

import pytest
from test_softirq_inline import FLOOD_PPS, STACK_RX_NS, delivered_share

from rxlab.errors import UsageError
from rxlab.kcheck import model


def scenario(app_cpu: int, *, threads: bool = True, kernel: str = "6.18") -> dict:
    d = model.scenario([model.group("flood", list(range(40000, 40016)), FLOOD_PPS)],
                       {"rps_cpus": "2", "thread_backlog_napi": threads}, app_cpu=app_cpu,
                       duration=0.5, costs={"stack_rx": STACK_RX_NS})
    d["host"]["kernel"] = kernel
    d["apps"][0]["rcvbuf"] = 212992  # net.core.rmem_default
    d["apps"][0]["cost"] = {"user_ns": 0}
    d["drain"] = 0.0
    return d


def test_a_kernel_before_6_10_refuses_it_in_one_line():
    with pytest.raises(UsageError) as err:
        model.to_scenario(scenario(0, kernel="6.9"))
    msg = str(err.value)
    assert "kernel.thread_backlog_napi" in msg and "6.10" in msg and "\n" not in msg


def test_the_remote_backlog_runs_in_its_thread_woken_without_an_ipi():
    res = model.simulate(scenario(0))
    cpu1 = res.data["cpus"][1]
    sn = {c["cpu"]: c["softnet_stat"] for c in res.data["cpus"]}
    assert sn[1]["processed"] > 0.2 * FLOOD_PPS * 0.5  # CPU 1 is busy with the flood
    assert sn[1]["received_rps"] == 0  # woken by try_to_wake_up, not by an RPS IPI
    assert cpu1["util"]["softirq"] < 0.01 and cpu1["util"]["system"] > 0.97
    tasks = {t["task"]: t for t in res.data["tasks"]}
    assert tasks["backlog_napi/1"]["share"] > 0.97  # its time is the thread's own
    assert tasks["backlog_napi/0"]["cpu_s"] == 0  # CPU 0's own backlog is never used
    assert "ksoftirqd/1" not in tasks
    # without the parameter the same work is CPU 1's softirq, kicked by IPIs
    off = model.simulate(scenario(0, threads=False))
    assert {c["cpu"]: c["softnet_stat"] for c in off.data["cpus"]}[1]["received_rps"] > 0
    assert off.data["cpus"][1]["util"]["softirq"] > 0.97


def test_a_reader_on_the_flooded_cpu_is_not_starved_by_its_own_recv():
    """On 6.18 without it, the same-CPU reader's recv() runs the pending NET_RX inline
    and gets under 5 % of what a reader elsewhere gets (test_softirq_inline); with the
    backlog in a thread nothing is pending in softirq there: the reader and
    backlog_napi/1 are two fair-class tasks, and the reader takes what it needs."""
    same, other = model.simulate(scenario(1)), model.simulate(scenario(0))
    assert delivered_share(same) > 0.5 * delivered_share(other) > 0.1
    assert same.data["cpus"][1]["util"]["softirq"] < 0.01
    tasks = {t["task"]: t for t in same.data["tasks"]}
    assert tasks["receiver/0"]["softirq_s"] == 0  # no receive work in its syscalls


def test_deterministic_and_every_packet_accounted_for():
    a, b = model.simulate(scenario(1)), model.simulate(scenario(1))
    assert a.data == b.data
    pk = a.data["packets"]
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]


@pytest.mark.parametrize(("cmdline", "version", "on"), [
    ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 thread_backlog_napi quiet", "#1 SMP", True),
    ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet", "#1 SMP PREEMPT_RT", True),
    ("BOOT_IMAGE=/vmlinuz thread_backlog_napi_x=1", "#1 SMP PREEMPT_DYNAMIC", False),
])
def test_the_host_reader_sees_the_boot_parameter_or_preempt_rt(cmdline, version, on):
    from rxlab.host.read import backlog_threads

    assert backlog_threads(cmdline, version) is on
