"""tune --objective latency searches what moves the application's p99 (rxlab.tune.latency):
interrupt moderation below the current rx-usecs and the application's threads off the
CPUs that take rx interrupts; it says which kinds of setting it tried, and a setting it
recommends lowers p99 on every seed by a paired interval that excludes 0 (compare's
statistic, rxlab.stats.paired_difference).

The host is the trial's RPC service (issue 34): 8 CPUs, 4 queues with their interrupts on
CPUs 0-3, TCP requests at 400 kpps, the workers on the same CPUs, rx-usecs 8.
"""

from __future__ import annotations

import math

import pytest

from rxlab.build import build
from rxlab.scenario import scenario_from_dict
from rxlab.stats import paired_difference
from rxlab.tune import tune
from rxlab.tune.latency import candidates
from rxlab.tune.recommend import commands


def rpc(**nic) -> dict:
    return {
        "name": "rpc-lat", "seed": 1, "duration": 0.05,
        "host": {"cpus": 8, "kernel": "6.12", "cost_profile": "modern-x86"},
        "nic": {"driver": "mlx5", "queues": 4, "irq_affinity": "0-3", "rx_usecs": 8, **nic},
        "traffic": {"groups": [{
            "name": "rpc", "flows": 2000, "proto": "tcp", "src": {"cidr": "10.0.0.0/8"},
            "dst": {"addr": "192.168.0.10"}, "sport": {"range": [1024, 65535]},
            "dport": {"value": 8080}, "rate": {"pps": 400000}, "arrivals": "poisson",
            "size": 300}]},
        "apps": [{"name": "rpc", "cpus": "0-3", "cost": {"user_ns": 4000}}],
    }


def test_moderation_and_placement_are_candidates():
    sc = scenario_from_dict(rpc())
    c, said = candidates(sc, build(sc))
    assert c["rx-usecs 0"]["overrides"] == {"nic.rx_usecs": 0.0}
    assert {n for n in c if n.startswith("rx-usecs")} == {"rx-usecs 0", "rx-usecs 2",
                                                          "rx-usecs 4"}
    assert c["apps off receive cpus"]["overrides"] == {"apps.0.cpus": [4, 5, 6, 7]}
    assert [s.split(":")[0] for s in said] == ["deferral"]  # none deferred
    cmds = [x["cmd"] for x in commands({"overrides": {"nic.rx_usecs": 0.0}}, sc, "eth1")]
    assert cmds == ["ethtool -C eth1 adaptive-rx off rx-usecs 0"]


def test_nothing_to_try_is_said():
    d = rpc(rx_usecs=0)
    d["apps"][0]["cpus"] = "4-7"
    d["kernel"] = {"busy_read": 20}
    sc = scenario_from_dict(d)
    c, said = candidates(sc, build(sc))
    assert c == {}
    assert [s.split(":")[0] for s in said] == ["moderation", "deferral", "busy polling",
                                              "placement"]


def test_busy_polling_is_a_latency_candidate_with_its_sysctl():
    """No socket busy-polls: net.core.busy_read 50 (net.rst's recommendation) is tried,
    and its command is the sysctl; a kernel before the loop rxlab models says why not."""
    sc = scenario_from_dict(rpc())
    c, _ = candidates(sc, build(sc))
    assert c["busy_read 50"]["overrides"] == {"kernel.busy_read": 50}
    assert c["busy_read 50"]["family"] == "busy_poll"
    cmds = [x["cmd"] for x in commands({"overrides": c["busy_read 50"]["overrides"]}, sc,
                                       "eth1")]
    assert cmds == ["sysctl -w net.core.busy_read=50"]
    d = rpc()
    d["host"]["kernel"] = "4.9"
    d["nic"]["driver"] = "generic"
    sc = scenario_from_dict(d)
    c, said = candidates(sc, build(sc))
    assert "busy_read 50" not in c
    assert any(x.startswith("busy polling: rxlab models the socket busy loop from 4.10")
               for x in said)


@pytest.mark.slow
def test_latency_recommendation_is_confirmed_by_a_paired_interval():
    r = tune(scenario_from_dict(rpc()), objective="latency", jobs=1)
    kinds = {k["kind"]: k for k in r["searched"]}
    assert kinds["moderation"]["tried"] and kinds["placement"]["tried"]
    assert r["recommended"], r["notes"]
    b = [r["before"][lab]["p99_ns"] for lab in r["runs"]]
    a = [r["after"][lab]["p99_ns"] for lab in r["runs"]]
    iv = paired_difference(b, a)  # before - after: > 0 when p99 falls
    assert not math.isnan(iv.half) and iv.estimate - iv.half > 0, iv
    assert r["commands"] and all(c["cmd"] for c in r["commands"])


def test_deferred_irqs_are_a_latency_candidate_with_its_sysfs_command():
    """A queue that defers its IRQ makes packets wait for the NAPI hrtimer: deferral off
    is tried, and its command is the device's sysfs file."""
    sc = scenario_from_dict(rpc(rx_usecs=0, napi_defer_hard_irqs=2, gro_flush_timeout=50000))
    c, said = candidates(sc, build(sc))
    assert c["deferral off"]["overrides"] == {"nic.napi_defer_hard_irqs": 0}
    assert "4 of 4 queues" in c["deferral off"]["what"]
    cmds = [x["cmd"] for x in commands({"overrides": c["deferral off"]["overrides"]}, sc,
                                       "eth1")]
    assert cmds == ["echo 0 > /sys/class/net/eth1/napi_defer_hard_irqs"]
