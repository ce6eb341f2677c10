"""top's view of a simulated run (rxlab.report.topview) against /proc/stat semantics."""

from __future__ import annotations

import math
import time

import pytest

from rxlab.host.procfs import parse_proc_stat
from rxlab.report.topview import (
    STAT_FIELDS,
    proc_stat_text,
    summary_line,
    summary_of,
    top_summary,
    top_view,
)

ZERO = dict.fromkeys(STAT_FIELDS, 0)


def util(softirq=0.0, ksoftirqd=0.0, irq=0.0, system=0.0, user=0.0):
    busy = softirq + irq + system + user  # softirq includes ksoftirqd's share
    return {"softirq": softirq, "ksoftirqd": ksoftirqd, "irq": irq, "system": system,
            "user": user, "idle": 1.0 - busy}


def test_summary_is_each_delta_over_the_sum():
    # /proc/stat columns: user nice system idle iowait irq softirq steal guest guest_nice;
    # guest time is already inside user, so top does not add it again
    a = parse_proc_stat("cpu  100 0 50 800 0 10 40 0 0 0\n")["all"]
    b = parse_proc_stat("cpu  300 0 150 1400 0 30 120 0 77 0\n")["all"]
    s = top_summary(a, b)  # deltas 200 0 100 600 0 20 80 0: total 1000
    assert s == pytest.approx({"us": 20.0, "ni": 0.0, "sy": 10.0, "id": 60.0, "wa": 0.0,
                               "hi": 2.0, "si": 8.0, "st": 0.0})


def test_summary_of_this_hosts_proc_stat():
    with open("/proc/stat") as f:
        a = parse_proc_stat(f.read())
    time.sleep(0.05)
    with open("/proc/stat") as f:
        b = parse_proc_stat(f.read())
    assert set(a) >= {"all", 0}
    s = top_summary(a["all"], b["all"])
    assert all(0.0 <= v <= 100.0 for v in s.values())
    assert math.isclose(sum(s.values()), 100.0) or sum(s.values()) == 0.0


def test_ksoftirqd_time_is_si_and_its_own_row():
    """One of four CPUs saturated in ksoftirqd: si 25 % of the machine, idle 75 %; the
    ksoftirqd/0 row 100 % of one CPU (Irix mode), 25 % of the machine (Solaris mode).
    The same softirq work run inline shows the same si and no task row."""
    data = {"cpus": [{"cpu": 0, "util": util(softirq=1.0, ksoftirqd=1.0)},
                     *({"cpu": c, "util": util()} for c in (1, 2, 3))]}
    v = top_view(data)
    assert v["summary"]["si"] == pytest.approx(25.0) and v["summary"]["id"] == 75.0
    assert v["ksoftirqd"][0] == {"command": "ksoftirqd/0", "cpu_pct": 100.0,
                                 "cpu_pct_solaris": 25.0}
    inline = {"cpus": [{"cpu": 0, "util": util(softirq=1.0)},
                       *({"cpu": c, "util": util()} for c in (1, 2, 3))]}
    w = top_view(inline)
    assert w["summary"] == v["summary"] and w["ksoftirqd_pct_sum"] == 0.0
    assert summary_line(v["summary"]).startswith("%Cpu(s):  0.0 us,  0.0 sy,  0.0 ni, 75.0 id")


def test_model_summary_equals_top_over_the_synthetic_proc_stat():
    cpus = [{"cpu": 0, "util": util(softirq=0.6, ksoftirqd=0.4, irq=0.1, system=0.05,
                                    user=0.2)},
            {"cpu": 1, "util": util(softirq=0.3, irq=0.2)}]
    text = proc_stat_text(cpus, duration_s=100.0, user_hz=100)  # 10,000 ticks per CPU
    st = parse_proc_stat(text)
    assert st[0]["softirq"] == 6000 and st[0]["irq"] == 1000 and st[1]["idle"] == 5000
    got = top_summary(ZERO, st["all"])
    want = summary_of([c["util"] for c in cpus])
    assert got == pytest.approx(want, abs=0.01)
    assert got["si"] == pytest.approx(45.0) and got["hi"] == pytest.approx(15.0)
    per_cpu = top_summary(ZERO, st[1])
    assert per_cpu["id"] == pytest.approx(50.0)


def test_live_top_summary_line_from_proc_stat():
    """rxlab top: the %Cpu(s) line between two /proc/stat readings, as top computes it."""
    from rxlab.host.top import Sample, rates, render

    a = Sample(0.0, {}, {}, parse_proc_stat("cpu  10 0 10 80 0 0 0 0 0 0\n"))
    b = Sample(1.0, {}, {}, parse_proc_stat("cpu  10 0 30 130 0 5 15 0 0 0\n"))
    r = rates(a, b)  # deltas: sy 20, id 50, hi 5, si 15 of 90
    assert r["cpu_summary"]["si"] == pytest.approx(100 * 15 / 90)
    assert r["cpu_summary"]["id"] == pytest.approx(100 * 50 / 90)
    assert rates(Sample(0.0, {}), Sample(1.0, {}))["cpu_summary"] is None
    from rich.console import Console

    console = Console(width=100, record=True)
    console.print(render(r))
    assert "16.7 si" in console.export_text()
