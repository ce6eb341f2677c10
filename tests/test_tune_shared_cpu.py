"""rxlab tune's remedies for a reader that shares its CPU with receive work
(rxlab.tune.drops.shared_cpu): the reader moved off the receive CPUs, RPS moved off the
reader's CPU, threaded NAPI. Each is simulated on five seeds like every candidate, and
the reader's socket drops must fall on every one for it to be adopted.

The flood of test_threaded_napi on a 4-CPU host, its queue's interrupt and the reader on
CPU 1: the reader's recv() runs CPU 1's NET_RX softirq (6.18) and gets almost nothing.
"""

from __future__ import annotations

import pytest
from test_threaded_napi import scenario

from rxlab.build import build
from rxlab.kcheck import model
from rxlab.tune import tune
from rxlab.tune.drops import shared_cpu
from rxlab.tune.recommend import commands


def shared(kernel: str = "6.18", **kw) -> dict:
    d = scenario(1, threaded=False, kernel=kernel, **kw)
    d["nic"]["irq_affinity"] = [1]
    d["host"]["cpus"] = 4
    d["duration"] = 0.05
    return d


def test_the_three_remedies_are_candidates_with_their_commands():
    sc = model.to_scenario(shared())
    c = shared_cpu(sc, build(sc))
    assert c["apps off receive cpus"]["overrides"] == {"apps.0.cpus": [0]}
    assert c["threaded napi"]["overrides"] == {"nic.threaded": True}
    cmds = [x["cmd"] for x in commands({"overrides": {"nic.threaded": True,
                                                       "apps.0.cpus": [0, 2]}}, sc, "eth1")]
    assert "echo 1 > /sys/class/net/eth1/threaded" in cmds
    assert "taskset -apc 0,2 $(pidof receiver)" in cmds


def test_rps_to_the_reader_s_cpu_gets_rps_without_it():
    d = shared(rps="6")  # CPUs 1 and 2
    sc = model.to_scenario(d)
    c = shared_cpu(sc, build(sc))
    assert c["rps off app cpus"]["overrides"] == {"kernel.rps_cpus": "4"}


def test_no_threaded_napi_before_5_12_and_nothing_for_a_reader_elsewhere():
    sc = model.to_scenario(shared(kernel="5.10"))
    assert "threaded napi" not in shared_cpu(sc, build(sc))
    d = shared()
    d["apps"][0]["cpus"] = 3
    sc = model.to_scenario(d)
    assert shared_cpu(sc, build(sc)) == {}


@pytest.mark.slow
def test_each_remedy_is_proved_on_five_seeds():
    r = tune(model.to_scenario(shared()), objective="drops", jobs=1)
    cands = r["candidates"]
    for name in ("apps off receive cpus", "threaded napi"):
        v = cands[name]["validation"]
        assert v["wins"] == v["runs"] == 5, (name, v)
