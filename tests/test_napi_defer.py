"""IRQ deferral (napi_defer_hard_irqs, gro_flush_timeout) as napi_complete_done and
napi_watchdog use them (net/core/dev.c, 6.18; rxlab/kernel/napi_defer.py).

The rules checked: a poll that found work re-arms the count; each completion with the
count above 0 decrements it and re-polls from the hrtimer after gro_flush_timeout, with the
device IRQ masked; after napi_defer_hard_irqs empty polls the IRQ comes back. Neither knob
alone defers anything (GRO holds no packet in rxlab). The costs are modern-x86's; nothing
here is set from a measurement it is compared with.
"""

from __future__ import annotations

import pytest

import rxlab
from rxlab.errors import UsageError
from rxlab.scenario import scenario_from_dict

TIMEOUT_NS = 50_000


def scenario(pps: float, *, defer=0, timeout=0, arrivals="constant", kernel="6.18",
             threaded=False, duration=0.1, queues=1) -> dict:
    nic = {"queues": queues, "irq_affinity": [0] * queues, "rx_mode": "napi", "rxhash": False,
           "link_gbps": 100, "napi_defer_hard_irqs": defer, "gro_flush_timeout": timeout}
    if threaded:
        nic |= {"threaded": True, "napi_thread_affinity": [0] * queues}
    return {
        "name": "defer", "seed": 3, "duration": duration, "drain": 0.01,
        "host": {"cpus": 2, "kernel": kernel},
        "nic": nic,
        "traffic": {"groups": [{
            "name": "rr", "flows": 1, "proto": "udp", "src": {"addr": "10.0.0.1"},
            "dst": {"addr": "10.0.0.2"}, "sport": {"value": 40000}, "dport": {"value": 9000},
            "rate": {"pps": pps}, "arrivals": arrivals, "size": 64}]},
        "apps": [{"name": "server", "cpus": 1, "batch": 8}],
    }


def run(d: dict):
    return rxlab.simulate(scenario_from_dict(d, "test"))


def queue(res) -> dict:
    return res.data["queues"][0]


@pytest.mark.parametrize("defer", [1, 3, 10])
def test_a_lone_packet_takes_one_irq_then_defer_empty_timer_polls(defer):
    """100 packets/s, 10 ms apart, each far past the last one's deferral: one IRQ and
    poll with work (count = defer, then defer - 1 and the timer), then empty timer polls
    that run the count down; the last one (count 0) enables the IRQ."""
    res = run(scenario(100, defer=defer, timeout=TIMEOUT_NS))
    q, pk = queue(res), res.data["packets"]
    n = pk["offered"]
    assert n == pk["delivered"] > 5
    assert q["irqs"] == n
    assert q["timer_polls"] == defer * n
    assert q["empty_polls"] == defer * n
    assert q["polls"] == (defer + 1) * n


def test_a_steady_stream_is_polled_by_the_timer_alone():
    """A packet every 10 us, timer every 50 us: every timer poll finds work, so after the
    first interrupt the IRQ never comes back while the stream lasts."""
    base = run(scenario(100_000))
    dfr = run(scenario(100_000, defer=2, timeout=TIMEOUT_NS))
    assert queue(base)["irqs"] > 1000 and queue(base)["timer_polls"] == 0
    q = queue(dfr)
    assert q["irqs"] <= 2  # the first packet's, and one after the drain's empty polls
    # one timer poll per gro_flush_timeout and poll: ~0.1 s / 50 us
    assert 0.9 * 0.1 / 50e-6 < q["timer_polls"] < 1.0 * 0.1 / 50e-6 + 3
    assert dfr.data["packets"]["delivered"] == base.data["packets"]["delivered"]


def test_the_wait_for_the_timer_adds_half_a_period_on_average():
    """Poisson arrivals see the timer's period (gro_flush_timeout plus the poll) at a
    uniform phase: the mean latency to the socket grows by about half of it."""
    base = run(scenario(50_000, arrivals="poisson"))
    dfr = run(scenario(50_000, arrivals="poisson", defer=2, timeout=TIMEOUT_NS))
    grown = dfr.data["latency_ns"]["to_socket"]["mean"] - base.data["latency_ns"][
        "to_socket"]["mean"]
    assert 0.9 * TIMEOUT_NS / 2 < grown < 1.15 * TIMEOUT_NS / 2, grown


@pytest.mark.parametrize("defer, timeout", [(5, 0), (0, TIMEOUT_NS)])
def test_either_knob_alone_defers_nothing(defer, timeout):
    """napi_defer_hard_irqs without a timeout runs its count down with the IRQ enabled;
    gro_flush_timeout alone arms the timer only while GRO holds packets."""
    base, one = run(scenario(20_000, arrivals="poisson")), run(
        scenario(20_000, arrivals="poisson", defer=defer, timeout=timeout))
    assert one.data["queues"] == base.data["queues"]
    assert one.data["latency_ns"] == base.data["latency_ns"]
    assert queue(one)["timer_polls"] == 0


def test_the_timer_polls_on_the_cpu_that_armed_it_as_irq_time():
    """The hrtimer is pinned: its NET_RX runs on the IRQ's CPU 0, and each expiry costs the
    napi_watchdog stage as irq time there, as a device interrupt costs hardirq."""
    res = run(scenario(100, defer=4, timeout=TIMEOUT_NS))
    q = queue(res)
    cpu0 = res.data["cpus"][0]
    irq_ns = cpu0["util"]["irq"] * res.data["duration_s"] * 1e9
    want = q["irqs"] * 300 + q["timer_polls"] * 300  # modern-x86 hardirq, napi_watchdog
    assert abs(irq_ns - want) < 0.02 * want
    assert res.data["cpus"][1]["util"]["softirq"] == 0  # (its irq time: the reader's wake-ups)


def test_threaded_napi_the_timer_wakes_the_kthread():
    res = run(scenario(100, defer=3, timeout=TIMEOUT_NS, threaded=True))
    q, n = queue(res), res.data["packets"]["offered"]
    assert q["irqs"] == n and q["timer_polls"] == 3 * n
    assert res.data["cpus"][0]["util"]["softirq"] == 0


def test_per_queue_values_apply_to_their_queue_only():
    d = scenario(2000, arrivals="poisson", queues=2)
    d["traffic"]["groups"][0]["flows"] = 16
    d["traffic"]["groups"][0]["sport"] = {"sequential": 40000}
    d["nic"]["rxhash"] = True
    d["nic"]["napi_defer_hard_irqs"] = {1: 4}
    d["nic"]["gro_flush_timeout"] = {1: TIMEOUT_NS}
    q0, q1 = run(d).data["queues"]
    assert q0["packets"] > 0 and q1["packets"] > 0
    assert q0["timer_polls"] == 0 and q1["timer_polls"] > 0


@pytest.mark.parametrize("kernel, nic, words", [
    ("5.4", {"napi_defer_hard_irqs": 2, "gro_flush_timeout": 1000},
     "nic.napi_defer_hard_irqs: Linux 5.4 has no napi_defer_hard_irqs (5.8+"),
    ("3.18", {"gro_flush_timeout": 1000}, "nic.gro_flush_timeout: Linux 3.18 has no"),
    ("6.12", {"napi_defer_hard_irqs": {0: 2}},
     "nic.napi_defer_hard_irqs: Linux 6.12 sets it per device only"),
    ("6.18", {"gro_flush_timeout": {3: 1000}}, "nic.gro_flush_timeout: queue 3 does not exist"),
    ("6.18", {"napi_defer_hard_irqs": -1}, "napi_defer_hard_irqs"),
    ("6.18", {"napi_defer_hard_irqs": 1 << 31}, "out of range 0..2147483647"),
])
def test_impossible_settings_are_one_line(kernel, nic, words):
    d = scenario(100, kernel=kernel)
    d["nic"].update(nic)
    with pytest.raises(UsageError) as err:
        scenario_from_dict(d, "test")
    msg = str(err.value)
    assert words in msg and "\n" not in msg, msg


def test_the_cli_refuses_deferral_on_an_old_kernel_with_exit_2(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", "run", "default", "--set",
                        "host.kernel=5.4", "--set", "nic.napi_defer_hard_irqs=2"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert "napi_defer_hard_irqs" in p.stderr


def test_host_export_carries_the_devices_deferral():
    """host read takes both files of /sys/class/net/DEV; export puts them in nic."""
    from rxlab.host.export import _nic_fields

    notes: list[str] = []
    nic = _nic_fields({"driver": "ice", "napi_defer_hard_irqs": 2, "gro_flush_timeout": 20000,
                       "irqs": {}}, "eth0", 4, notes)
    assert (nic["napi_defer_hard_irqs"], nic["gro_flush_timeout"]) == (2, 20000)
    nic = _nic_fields({"driver": "ice", "napi_defer_hard_irqs": 0, "gro_flush_timeout": None,
                       "irqs": {}}, "eth0", 4, notes)
    assert "napi_defer_hard_irqs" not in nic and "gro_flush_timeout" not in nic
