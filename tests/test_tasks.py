"""CPU time per task (rxlab.metrics.tasks): the result's ``tasks`` and ``rxlab run``'s
table, as /proc/PID/stat would show them, and their conservation.

The floods of test_softirq_inline and test_threaded_napi: a reader on the CPU whose
softirq does the receive work spends its CPU time in softirq inside its own recv()
(6.5+), or leaves it to ksoftirqd/1 (4.9-6.4); with threaded NAPI the work is the
kthread's own system time.
"""

from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console
from test_threaded_napi import scenario

from rxlab.build import build
from rxlab.errors import ConservationError
from rxlab.kcheck import model
from rxlab.kernel.counters import T_SOFTIRQ, T_SYSTEM, T_USER
from rxlab.report.tables import print_tasks
from rxlab.simulate import check_task_time, run_model


def tasks(res) -> dict[str, dict]:
    return {t["task"]: t for t in res.data["tasks"]}


def flood(kernel: str, app_cpu: int, threaded: bool = False) -> dict:
    return scenario(app_cpu, threaded=threaded, kernel=kernel, rps=None if threaded else "2")


def test_the_starved_reader_spends_its_cpu_in_softirq_in_its_own_recv():
    t = tasks(model.simulate(flood("6.18", 1)))
    reader = t["receiver/0"]
    assert reader["cpu"] == 1
    assert 0.4 < reader["share"] < 0.6  # its CFS half of cpu1 ...
    assert reader["softirq_s"] / reader["cpu_s"] > 0.95  # ... spent on receive work
    assert 0.4 < t["ksoftirqd/1"]["share"] < 0.6


def test_between_4_9_and_6_4_ksoftirqd_does_it_and_the_reader_runs_none():
    t = tasks(model.simulate(flood("6.1", 1)))
    assert t["receiver/0"]["softirq_s"] == 0
    assert t["ksoftirqd/1"]["share"] > 0.9


def test_with_threaded_napi_the_work_is_the_kthread_s_own_time():
    t = tasks(model.simulate(flood("6.18", 1, threaded=True)))
    assert t["napi/q0"]["cpu"] == 1 and t["napi/q0"]["softirq_s"] == 0
    assert t["napi/q0"]["share"] > 0.9
    assert t["receiver/0"]["softirq_s"] == 0
    assert "ksoftirqd/1" not in t


@pytest.mark.parametrize("name", ["default", "cpumap"])
def test_per_cpu_the_tasks_own_time_is_the_cpu_s_system_and_user_time(name):
    """No thread migrates in these scenarios: each task's time is on its own CPU."""
    m = build(model.to_scenario(_short(name)))
    run_model(m)
    check_task_time(m)
    own = np.zeros(m.params.ncpu, np.int64)
    for t, (_, cpu) in enumerate(m.threads):
        own[cpu] += m.so.thread[t]["th_ns"]
    for e, cpu in enumerate(m.params.cpumap["cpu"]):
        own[cpu] += m.cm.entry[e]["kt_ns"]
    own += m.sd.cpu["kw_ns"]
    assert (own == m.st.cpu_ns[:, T_SYSTEM] + m.st.cpu_ns[:, T_USER]).all()
    assert own.sum() > 0


def _short(name: str) -> dict:
    from rxlab.scenario import load_scenario

    d = load_scenario(name).model_dump(exclude_unset=True)
    d["duration"] = 0.01
    return d


def test_time_charged_to_no_task_is_a_conservation_error():
    m = build(model.to_scenario(flood("6.18", 1)))
    run_model(m)
    check_task_time(m)
    m.st.cpu_ns[1, T_SYSTEM] += 1  # system time that no task has
    with pytest.raises(ConservationError, match="task time conservation broken"):
        check_task_time(m)
    m.st.cpu_ns[1, T_SYSTEM] -= 1
    m.so.thread[0]["th_bh_ns"] += int(m.st.cpu_ns[:, T_SOFTIRQ].sum()) + 1
    with pytest.raises(ConservationError):
        check_task_time(m)


def test_the_table_fits_80_columns_and_names_the_busiest():
    res = model.simulate(flood("6.18", 1))
    con = Console(width=80, record=True, color_system=None)
    print_tasks(res.data, con)
    text = con.export_text()
    assert "receiver/0" in text and "ksoftirqd/1" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_explain_drops_says_where_the_reader_s_cpu_went(tmp_path, capsys):
    import yaml

    from rxlab.cli.main import main

    d = flood("6.18", 1)
    d["duration"] = 0.1
    path = tmp_path / "starved.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["explain", "drops", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "of its CPU time on receive work in its own recv()" in out


def test_no_cpumap_kthread_without_a_cpumap():
    """Without a cpumap the state keeps one placeholder entry; it is no task."""
    import rxlab
    from rxlab.scenario import load_scenario

    d = rxlab.simulate(load_scenario("default").model_copy(update={"duration": 0.002})).data
    assert not [t for t in d["tasks"] if t["kind"] == "cpumap"]
    c = rxlab.simulate(load_scenario("cpumap").model_copy(update={"duration": 0.002})).data
    assert {t["task"] for t in c["tasks"] if t["kind"] == "cpumap"} == {
        "cpumap/1", "cpumap/2", "cpumap/3", "cpumap/4"}
