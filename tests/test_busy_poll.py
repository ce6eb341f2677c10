"""Socket busy polling (SO_BUSY_POLL / net.core.busy_read, SO_PREFER_BUSY_POLL,
SO_BUSY_POLL_BUDGET) as sk_busy_loop, __napi_busy_loop and busy_poll_stop run it
(include/net/busy_poll.h, net/core/dev.c, 6.18; rxlab/kernel/busy_poll.py and
napi_busy_loop.py).

The rules checked: a read that finds its socket empty busy-polls until the first
``ktime_get_ns() >> 10`` tick past start + sk_ll_usec, as system time; a packet that
comes meanwhile is taken by the thread's own poll (LINUX_MIB_BUSYPOLLRXPACKETS), not by
softirq, though the device interrupt still fires (the NAPI is taken: MISSED); with
SO_PREFER_BUSY_POLL and IRQ deferral the IRQ stays masked, without deferral it does not
(napi.rst: "If gro_flush_timeout and napi_defer_hard_irqs are not set, Loop 3 cannot take
control from Loop 1"). The costs are modern-x86's; nothing here is set from a measurement
it is compared with.
"""

from __future__ import annotations

import re

import pytest

import rxlab
from rxlab.errors import UsageError
from rxlab.scenario import scenario_from_dict

TICK_NS = 1024  # busy_loop_current_time(): ktime_get_ns() >> 10


def scenario(pps: float, *, busy_read=0, app=None, nic=None, kernel="6.18", proto="udp",
             arrivals="constant", duration=0.05, cpus=2, app_cpus=1) -> dict:
    return {
        "name": "busy", "seed": 5, "duration": duration, "drain": 0.01,
        "host": {"cpus": cpus, "kernel": kernel},
        "nic": {"queues": 1, "irq_affinity": [0], "driver": "ice", "link_gbps": 100,
                **(nic or {})},
        "kernel": {"busy_read": busy_read},
        "traffic": {"groups": [{
            "name": "rr", "flows": 1, "proto": proto, "src": {"addr": "10.0.0.1"},
            "dst": {"addr": "10.0.0.2"}, "sport": {"value": 40000}, "dport": {"value": 9000},
            "rate": {"pps": pps}, "arrivals": arrivals, "size": 64}]},
        "apps": [{"name": "server", "cpus": app_cpus, "cost": {"user_ns": 500}, **(app or {})}],
    }


def run(d: dict):
    return rxlab.simulate(scenario_from_dict(d, "test"))


def conserved(res) -> int:
    pk = res.data["packets"]
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]
    return pk["offered"]


def test_an_idle_socket_busy_polls_until_the_1024_ns_tick_past_busy_read():
    """1000 packets/s, 1 ms apart, busy_read 100 us: each read's loop finds nothing and
    ends at the first tick past start + 100 (between 100 and 101 ticks of 1024 ns), plus
    busy_poll_stop's poll; every packet then comes by IRQ and softirq."""
    res = run(scenario(1000, busy_read=100))
    n = conserved(res)
    app, q = res.data["apps"][0], res.data["queues"][0]
    assert n == res.data["packets"]["delivered"] == app["wakeups"] >= 45
    assert app["busy_poll_packets"] == 0 and q["busy_poll_packets"] == 0
    assert q["irqs"] == n
    per_loop = app["busy_poll_s"] / n
    assert 100 * TICK_NS * 1e-9 < per_loop < (101 * TICK_NS + 1500) * 1e-9


def test_busy_read_zero_sleeps_and_has_no_busy_poll_fields():
    res = run(scenario(1000))
    assert "busy_poll_packets" not in res.data["apps"][0]
    assert "busy_poll_packets" not in res.data["queues"][0]


def test_a_loop_that_spans_the_gap_takes_every_later_packet_itself():
    """A packet every 100 us, busy_read 1000 us: the first packet wakes the reader (its
    socket has no NAPI id before), every later one is taken by the reader's busy poll; each
    still raises the device IRQ (IRQs are on when the loop takes the NAPI), whose
    napi_schedule finds it taken, so softirq polls nothing; the reader's CPU spins."""
    base = run(scenario(10_000))
    res = run(scenario(10_000, busy_read=1000))
    n = conserved(res)
    app, q = res.data["apps"][0], res.data["queues"][0]
    assert app["wakeups"] == 1
    assert app["busy_poll_packets"] == q["busy_poll_packets"] == n - 1
    assert q["irqs"] == n
    cpu0, cpu1 = (c["util"] for c in res.data["cpus"])
    base0 = base.data["cpus"][0]["util"]
    assert cpu0["softirq"] < base0["softirq"] / 20
    assert cpu1["idle"] < 0.02 and cpu1["system"] > 0.9  # the loop is system time
    lat, base_lat = (r.data["latency_ns"]["to_app"]["mean"] for r in (res, base))
    assert lat < base_lat - 1000  # no interrupt delay, softirq or wake-up in the way


def test_prefer_with_deferral_keeps_the_irq_masked():
    """SO_PREFER_BUSY_POLL with napi_defer_hard_irqs and gro_flush_timeout: busy_poll_stop
    arms the hrtimer instead of enabling the IRQ, so after the first packet the device
    interrupt does not come back while the reader keeps polling."""
    nic = {"napi_defer_hard_irqs": 2, "gro_flush_timeout": 200_000}
    res = run(scenario(10_000, busy_read=1000, nic=nic, app={"prefer_busy_poll": True}))
    n = conserved(res)
    q = res.data["queues"][0]
    assert q["irqs"] <= 2
    assert q["busy_poll_packets"] >= n - 2


def test_prefer_without_deferral_cannot_take_control_from_the_irq():
    """napi.rst: without gro_flush_timeout and napi_defer_hard_irqs, preferred busy
    polling still leaves every packet its interrupt."""
    res = run(scenario(10_000, busy_read=1000, app={"prefer_busy_poll": True}))
    n = conserved(res)
    assert res.data["queues"][0]["irqs"] == n


def test_so_busy_poll_overrides_busy_read():
    off = run(scenario(10_000, busy_read=1000, app={"busy_poll": 0}))
    assert "busy_poll_packets" not in off.data["apps"][0]  # no socket busy-polls
    on = run(scenario(10_000, app={"busy_poll": 1000}))
    assert on.data["apps"][0]["busy_poll_packets"] == conserved(on) - 1


def test_tcp_reads_busy_poll_too():
    res = run(scenario(10_000, busy_read=1000, proto="tcp"))
    n = conserved(res)
    assert res.data["apps"][0]["busy_poll_packets"] == n - 1


@pytest.mark.parametrize("case", ["shared_cpu", "two_threads", "rps", "threaded", "overload",
                                  "small_budget", "many_loops"])
def test_every_packet_accounted_for_and_runs_repeat(case):
    """Busy polling beside the rest of the receive path: on the interrupt's CPU, two
    busy-polling threads on one CPU (they take turns and hand the NAPI back), RPS,
    threaded NAPI, a load past what one CPU takes, a budget of 1, and thousands of short
    loops with a long timeout each (their EV_BUSY_POLL events stay bounded: one timeout
    and one kick per thread in the calendar)."""
    d = scenario(200_000, busy_read=50, arrivals="poisson", duration=0.02)
    if case == "shared_cpu":
        d["apps"][0]["cpus"] = 0
    elif case == "two_threads":
        g = d["traffic"]["groups"][0]
        d["traffic"]["groups"] = [g, {**g, "name": "rr2", "sport": {"value": 40001}}]
        d["apps"] = [{"name": "a", "cpus": 1, "groups": ["rr"]},
                     {"name": "b", "cpus": 1, "groups": ["rr2"]}]
    elif case == "rps":
        d["kernel"]["rps_cpus"] = "2"
    elif case == "threaded":
        d["nic"] |= {"threaded": True}
    elif case == "overload":
        d["traffic"]["groups"][0]["rate"] = {"pps": 3_000_000}
    elif case == "many_loops":
        d["host"]["cpus"] = 8
        d["nic"] |= {"queues": 4, "irq_affinity": [0, 1, 2, 3]}
        g = d["traffic"]["groups"][0]
        g |= {"flows": 64, "src": {"cidr": "10.0.0.0/8"}, "sport": {"range": [1024, 65535]},
              "rate": {"pps": 400_000}}
        d["kernel"]["busy_read"] = 5000
        d["apps"][0]["cpus"] = "4-7"
    elif case == "small_budget":
        d["apps"][0] |= {"busy_poll_budget": 1, "prefer_busy_poll": True}
        d["nic"] |= {"napi_defer_hard_irqs": 1, "gro_flush_timeout": 20_000}
    a, b = run(d), run(d)
    conserved(a)
    assert a.to_json() == b.to_json()
    assert sum(x["busy_poll_packets"] for x in a.data["apps"]) == sum(
        q["busy_poll_packets"] for q in a.data["queues"])


@pytest.mark.parametrize(("kernel", "extra", "words"), [
    ("4.9", {}, "ndo_busy_poll"),
    ("5.10", {"prefer_busy_poll": True}, "SO_PREFER_BUSY_POLL (5.11+"),
    ("5.10", {"busy_poll_budget": 16}, "SO_BUSY_POLL_BUDGET (5.11+"),
])
def test_versions_without_it_refuse_it(kernel, extra, words):
    d = scenario(1000, busy_read=50, kernel=kernel, app=extra)
    with pytest.raises(UsageError, match=re.escape(words)) as err:
        scenario_from_dict(d, "test")
    assert "\n" not in str(err.value)


def test_the_cli_refuses_busy_read_on_an_old_kernel_with_exit_2():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", "run", "default", "--set",
                        "host.kernel=4.9", "--set", "kernel.busy_read=50"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert "kernel.busy_read" in p.stderr
