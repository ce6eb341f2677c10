"""A long run says how long in one line on stderr when there is no bar (a pipe, --json)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from rxlab.cli.run_cmd import EstimateLine, _duration

CHUNK = 1 << 18


def _fed(expected: float, seconds_per_chunk: float, chunks: int) -> str:
    out = io.StringIO()
    est = EstimateLine(expected, out)
    now = [100.0]
    est.clock = lambda: now[0]
    for i in range(1, chunks + 1):
        est(i * CHUNK, 0.0)
        now[0] += seconds_per_chunk
    return out.getvalue()


def test_one_line_with_the_packets_and_the_time_measured_after_the_first_chunk():
    # 1 Mpps measured from the first chunk's end: 2.88e9 packets are about 48 min
    text = _fed(2.88e9, CHUNK / 1e6, 40)
    assert text.count("\n") == 1, text
    assert "2,880,000,000 packets" in text and "47 min" in text and "at 1 Mpps" in text


def test_a_run_that_ends_within_ten_seconds_says_nothing():
    assert _fed(5e6, CHUNK / 1e6, 20) == ""


def test_durations_read_as_a_person_would_say_them():
    assert [_duration(s) for s in (12.4, 250, 7500)] == ["12 s", "4 min 10 s", "2 h 05 min"]


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "text"])
def test_an_hour_of_traffic_in_a_pipe_says_how_long_within_seconds(tmp_path, json_flag):
    """rxlab run default --set duration=3600 [--json] 2>err | head -c1: err holds the line
    within 5 s on an idle machine (every step is slower on one loaded beyond its CPUs)."""
    err = tmp_path / "err"
    limit = 5.0 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    with open(err, "w") as fh:
        p = subprocess.Popen([sys.executable, "-m", "rxlab.cli.main", "run", "default",
                              "--set", "duration=3600", *json_flag],
                             stdout=subprocess.PIPE, stderr=fh)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < limit and not err.read_text():
            time.sleep(0.05)
        took = time.monotonic() - t0
    finally:
        p.kill()
        p.wait()
    line = err.read_text()
    assert "2,880,000,000 packets" in line and " more at " in line, (line, took)
    assert took < limit


def test_a_plan_of_runs_says_how_long_from_the_runs_after_the_first():
    from rxlab.cli.run_cmd import PlanLine

    out = io.StringIO()
    plan = PlanLine("reproduce x", out)
    now = [0.0]
    plan.clock = lambda: now[0]
    for done, t in ((1, 30.0), (2, 32.0), (3, 34.0), (4, 36.0)):  # the first run loads
        now[0] = t
        plan(done, 40, "case")
    # 2 s a run after the first: 38 runs left at the estimate (done 2) -> 76 s
    assert out.getvalue() == "rxlab: reproduce x: 40 runs, about 1 min 16 s more (2 done)\n"
    quick = io.StringIO()
    plan = PlanLine("reproduce y", quick)
    plan.clock = lambda: now[0]
    for done in range(1, 6):
        now[0] += 1.5
        plan(done, 6, "case")
    assert quick.getvalue() == ""  # the rest takes less than 10 s: nothing said


def test_compare_reports_each_finished_run_to_its_plan(monkeypatch):
    import rxlab.parallel as parallel
    from rxlab.compare.runner import build_configs, run_all

    def fake_run_local(fn, tasks, jobs, on_result):
        for rid, _ in tasks:
            on_result(rid, {"run_id": rid, "data": {}})
        return len(tasks)

    monkeypatch.setattr(parallel, "run_local", fake_run_local)
    configs = build_configs(["default"], ["rps:kernel.rps_cpus=f"], {}, 3, None)
    seen = []
    run_all(configs, 1, None, plan=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 6) for i in range(1, 7)]
