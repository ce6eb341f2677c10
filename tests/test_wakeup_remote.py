"""The waker's cost of waking a thread on another CPU (rxlab.kernel.wake): try_to_wake_up
from the NET_RX softirq (sock_def_readable, net/core/sock.c) costs the waking CPU
``wakeup_remote`` when the reader sleeps on another CPU, nothing on its own CPU, and the
idle wakee takes the IPI (``ipi_recv``)."""

import pytest

from rxlab.scenario import scenario_from_dict
from rxlab.simulate import simulate

PPS = 2000  # packets far apart: every packet finds the reader asleep
DURATION = 0.05


def lab(reader_cpu: int, wake_ns: float, *, ipi_recv: float = 0.0) -> dict:
    """One queue whose NAPI runs on CPU 0, one UDP flow at a constant rate, one reader."""
    return {
        "name": "wake", "seed": 5, "duration": DURATION, "drain": 0.005,
        "host": {"cpus": 2, "cost_profile": "modern-x86",
                 "costs": {"wakeup_remote": wake_ns, "ipi_recv": ipi_recv}},
        "nic": {"queues": 1, "irq_affinity": [0]},
        "traffic": {"groups": [{
            "name": "f", "flows": 1, "proto": "udp", "src": {"addr": "10.0.0.1"},
            "dst": {"addr": "10.0.1.1"}, "sport": {"value": 40000}, "dport": {"value": 53},
            "rate": {"pps": PPS, "per_flow": "constant"}, "arrivals": "constant",
            "size": 128}]},
        "apps": [{"name": "r", "cpus": str(reader_cpu), "batch": 8,
                  "connected": False}],
    }


def ns(data: dict, cpu: int, cat: str) -> float:
    return data["cpus"][cpu]["util"][cat] * data["duration_s"] * 1e9


def run(d: dict) -> dict:
    return simulate(scenario_from_dict(d)).data


@pytest.mark.parametrize("wake_ns", [3000.0, 11000.0])
def test_remote_wakeup_charges_the_waking_softirq_exactly(wake_ns):
    """Reader on CPU 1: CPU 0's softirq time grows by exactly wakeup_remote per remote
    wake-up, and nothing else on CPU 0 changes."""
    base, more = run(lab(1, 0.0)), run(lab(1, wake_ns))
    w = more["apps"][0]["wakeups_remote"]
    assert w == base["apps"][0]["wakeups_remote"] >= 0.9 * PPS * DURATION
    assert more["apps"][0]["wakeups"] == w
    assert ns(more, 0, "softirq") - ns(base, 0, "softirq") == pytest.approx(w * wake_ns, abs=100)

    for cat in ("irq", "system", "user", "ksoftirqd"):
        assert ns(more, 0, cat) == pytest.approx(ns(base, 0, cat), abs=100)
    assert more["packets"]["delivered"] == base["packets"]["delivered"]


def test_same_cpu_wakeup_costs_nothing():
    """Reader on the softirq's own CPU: the same wake-ups, no charge at all."""
    base, more = run(lab(0, 0.0)), run(lab(0, 11000.0))
    assert more["apps"][0]["wakeups"] >= 0.9 * PPS * DURATION
    assert more["apps"][0]["wakeups_remote"] == 0
    assert more["cpus"] == base["cpus"]


def test_idle_wakee_takes_the_ipi():
    """The reader's idle CPU 1 spends ipi_recv as hard-interrupt time per remote wake-up."""
    base, more = run(lab(1, 500.0)), run(lab(1, 500.0, ipi_recv=2000.0))
    w = more["apps"][0]["wakeups_remote"]
    assert ns(more, 1, "irq") - ns(base, 1, "irq") == pytest.approx(w * 2000.0, abs=100)
    assert ns(more, 0, "softirq") == pytest.approx(ns(base, 0, "softirq"), abs=100)


def cpumap_lab(wake_ns: float) -> dict:
    """NAPI on CPU 0 redirects into a cpumap on CPU 1, whose kthread runs the stack for a
    reader on CPU 2: the softirq wakes the kthread, the kthread wakes the reader."""
    d = lab(2, wake_ns)
    d["host"]["cpus"] = 3
    d["xdp"] = {"rules": [{"match": {"proto": "udp"}, "action": "redirect-cpu",
                           "cpus": "1"}]}
    d["cpumap"] = {"cpus": "1", "qsize": 64, "gro": False}
    return d


def test_cpumap_kthread_wakes_charge_the_softirq_and_the_kthread():
    """wake_up_process of the kthread (kernel/bpf/cpumap.c __cpu_map_flush) is charged to
    CPU 0's softirq; the kthread waking the reader on CPU 2, to CPU 1's system time."""
    wake = 7000.0
    base, more = run(cpumap_lab(0.0)), run(cpumap_lab(wake))
    kt = more["cpumap"][0]["kthread_wakeups"]
    rd = more["apps"][0]["wakeups_remote"]
    assert kt == base["cpumap"][0]["kthread_wakeups"] >= 0.9 * PPS * DURATION
    assert rd == base["apps"][0]["wakeups_remote"] >= 0.9 * PPS * DURATION
    assert ns(more, 0, "softirq") - ns(base, 0, "softirq") == pytest.approx(kt * wake,
                                                                            abs=100)
    assert ns(more, 1, "system") - ns(base, 1, "system") == pytest.approx(rd * wake,
                                                                          abs=100)
    assert ns(more, 2, "softirq") == ns(base, 2, "softirq") == 0
