"""Where a CPU's pending NET_RX work runs when a reader shares the CPU, version by version
(kernel/softirq.c; docs/model.md, "Where the receive work runs").

A UDP flood is steered by RPS to CPU 1, whose per-packet cost keeps it saturated, and a
reader is pinned either to CPU 1 or to CPU 0. Every recv() ends its datagram with
spin_unlock_bh() (``__skb_recv_udp``), whose ``local_bh_enable`` runs the pending softirq
inline in the reader's syscall, unless the kernel defers to a running ksoftirqd:

* 3.9-4.8 and 6.5+: the reader's recv runs the softirq, one datagram per inline run, so
  the same-CPU reader gets a tiny fraction of what a reader elsewhere gets; it keeps its
  CFS half of the CPU, spent in softirq (the real 6.18 kernel: 0.19-0.22 % of the packets
  against 49-50 % on the other CPU, the reader's half of CPU 1 in ``__local_bh_enable_ip``);
* 4.9-6.4: nothing runs inline while ksoftirqd runs; the reader and ksoftirqd share the
  CPU as two CFS tasks.

No cost here is set from those figures: the flood's per-packet cost only saturates CPU 1.
"""

from __future__ import annotations

import pytest

from rxlab.kcheck import model

FLOOD_PPS = 200_000
STACK_RX_NS = 20_000  # CPU 1 handles 50,000 packets a second: a quarter of the flood


def run(kernel: str, app_cpu: int, user_ns: int = 0):
    d = model.scenario([model.group("flood", list(range(40000, 40016)), FLOOD_PPS)],
                       {"rps_cpus": "2"}, app_cpu=app_cpu, duration=0.5,
                       costs={"stack_rx": STACK_RX_NS})
    d["host"]["kernel"] = kernel
    d["apps"][0]["rcvbuf"] = 212992  # net.core.rmem_default
    d["apps"][0]["cost"] = {"user_ns": user_ns}
    d["drain"] = 0.0
    return model.simulate(d)


def delivered_share(res) -> float:
    pk = res.data["packets"]
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]
    return pk["delivered"] / pk["offered"]


@pytest.mark.parametrize("kernel", ["6.18", "6.5", "4.8"])
def test_a_reader_on_the_flooded_cpu_starves_where_recv_runs_the_softirq(kernel):
    same, other = run(kernel, 1), run(kernel, 0)
    assert delivered_share(other) > 0.2  # CPU 1's capacity: a quarter of the flood
    assert delivered_share(same) < 0.05 * delivered_share(other)
    cpu1 = same.data["cpus"][1]["util"]
    # all of CPU 1 is receive work; ksoftirqd has about half, the reader's syscalls the rest
    assert cpu1["softirq"] > 0.97
    assert 0.4 < cpu1["ksoftirqd"] < 0.6
    drops = same.data["packets"]["dropped_by_reason"]
    assert drops["socket_rcvbuf"] > 0  # what the reader never gets to read


def test_between_4_9_and_6_4_the_reader_and_ksoftirqd_share_the_cpu():
    light = run("6.1", 1)  # a reader that needs little CPU reads what CPU 1 processed
    assert delivered_share(light) > 0.9 * delivered_share(run("6.1", 0))
    heavy = run("6.1", 1, user_ns=50_000)  # both want the whole CPU: two CFS tasks
    cpu1 = heavy.data["cpus"][1]["util"]
    assert 0.4 < cpu1["ksoftirqd"] < 0.6
    assert 0.4 < cpu1["user"] + cpu1["system"] < 0.6
    assert cpu1["softirq"] - cpu1["ksoftirqd"] < 0.02  # nothing ran inline


def test_the_same_flood_with_the_reader_elsewhere_does_not_depend_on_the_version():
    shares = {k: delivered_share(run(k, 0)) for k in ("4.8", "6.1", "6.18")}
    assert max(shares.values()) - min(shares.values()) < 0.01, shares


def tcp_run(kernel: str, hz: int):
    """A TCP reader (no local_bh_enable point in the model's recv) doing 20 us of its own
    work per packet on the flooded CPU 1: ksoftirqd and the reader share it as two CFS
    tasks, and every scheduler tick inside the reader's run meets NET_RX pending."""
    g = model.group("flood", list(range(40000, 40016)), FLOOD_PPS)
    g["proto"] = "tcp"
    d = model.scenario([g], {"rps_cpus": "2"}, app_cpu=1, duration=0.5,
                       costs={"stack_rx": STACK_RX_NS})
    d["host"].update(kernel=kernel, hz=hz)
    d["apps"][0].update(rcvbuf=212992, cost={"user_ns": 20_000})
    d["drain"] = 0.0
    res = model.simulate(d)
    return res, {t["task"]: t for t in res.data["tasks"]}


@pytest.mark.parametrize("hz", [250, 1000])
def test_the_tick_runs_pending_softirq_in_the_interrupted_reader_from_6_5(hz):
    """kernel/softirq.c invoke_softirq at the tick's irq_exit (6.5+): the reader keeps
    its CFS half of CPU 1 but spends part of it in softirq; more ticks, more of it.
    4.9-6.4 leave the work to ksoftirqd: the reader's half is all its own work."""
    old, t_old = tcp_run("6.1", hz)
    new, t_new = tcp_run("6.18", hz)
    assert t_old["receiver/0"]["softirq_s"] == 0
    assert 0.45 < t_old["receiver/0"]["share"] < 0.55
    assert 0.45 < t_new["receiver/0"]["share"] < 0.55  # still its CFS half ...
    stolen = t_new["receiver/0"]["softirq_s"] / t_new["receiver/0"]["cpu_s"]
    assert stolen > (0.4 if hz == 1000 else 0.2)  # ... part of it on receive work
    # the reader's own work shrinks by about what its ticks ran inline (its slices
    # end at a tick: at HZ 250 one tick per run of the reader, at 1000 about four)
    lost = old.data["cpus"][1]["util"]["user"] - new.data["cpus"][1]["util"]["user"]
    assert lost > 0.5 * t_new["receiver/0"]["softirq_s"] / new.data["duration_s"] > 0.05
    assert 0.45 < t_new["ksoftirqd/1"]["share"] < 0.55  # ksoftirqd keeps its own half
