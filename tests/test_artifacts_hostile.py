"""The hostile cases of issue 33 that are not one command line of tests/hostile_cases.py:
saved artifacts damaged on disk, a damaged or unwritable compile cache, CPU-time
conservation, signals to a large sweep, and hostile text on the terminal.

Each case runs the real entry point (``python -m rxlab.cli.main``) in a child process and
accepts only exit 0 with a correct result, or exit 2 with one ``rxlab: error:`` line
naming the file and what is wrong (``one_line.cli_error``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from one_line import cli_error
from test_capture import FRAMES, write_pcap

ROOT = Path(__file__).resolve().parents[1]
SHARES = ("softirq", "irq", "system", "user", "idle")


def rxlab(*argv, cwd=None, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "rxlab.cli.main", *map(str, argv)],
                          cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout,
                          **kw)


def usage(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    return cli_error(p.stderr, *needles)


# ----------------------------------------------------------------- CPU-time conservation


def assert_shares(result: dict) -> None:
    """Per CPU every share is in [0, 1] and they sum to 1 (ksoftirqd is inside softirq)."""
    for row in result["cpus"]:
        u = row["util"]
        assert all(0 <= u[k] <= 1 for k in u), row
        assert sum(u[k] for k in SHARES) == pytest.approx(1, abs=1e-5), row
        assert u["ksoftirqd"] <= u["softirq"], row


def run_json(*argv, cwd=None) -> dict:
    p = rxlab("run", *argv, "--json", cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@pytest.mark.parametrize("packets, gap_s", [(1, 0.0), (20, 1e-7)], ids=["one-packet", "2us"])
def test_short_captures_give_shares_that_sum_to_one(tmp_path, packets, gap_s):
    """The whole run is shorter than the IRQ latency: before the fix the first interval's
    IRQ, softirq and user time was divided by the capture's 1 ns or 2 us span (irq 300.0,
    system 433.0); only the time inside the span counts."""
    cap = write_pcap(tmp_path / "c.pcap", [(i * gap_s, FRAMES[0][0]) for i in range(packets)])
    res = run_json("default", "--pcap", cap)
    assert res["packets"]["offered"] == packets
    assert_shares(res)


@pytest.mark.parametrize("sets", [
    ["apps.0.cost.user_ns=1e9"],
    ["host.costs={stack_rx: 1e9, driver_rx: 1e9, hardirq: 1e9}"],
    ["host.cost_jitter={dist: lognormal, cv: 100}"],
], ids=["user-ns-max", "costs-max", "jitter-max"])
def test_maximal_costs_give_shares_that_sum_to_one(sets):
    """Segments of up to 1 s charged past a run without drain (user was 200.0 with a 1 s
    user_ns: the last interval took the time past the end of the run)."""
    argv = ["default", "--duration", "0.01", "--set", "drain=0"]
    for s in sets:
        argv += ["--set", s]
    assert_shares(run_json(*argv))


def test_series_intervals_are_never_over_full():
    import rxlab

    res = rxlab.simulate("default", duration=0.01, overrides={
        "drain": 0, "apps.0.cost.user_ns": 1e9})
    busy = [x for row in res.series["cpu_busy"] for x in row]
    assert max(busy) <= 1.0 + 1e-12
    assert_shares(res.data)


def test_a_cpu_over_full_is_an_internal_error_with_the_figures():
    from rxlab.errors import ConservationError
    from rxlab.metrics.result import Result
    from rxlab.simulate import check_cpu_time

    util = {"softirq": 0.2, "ksoftirqd": 0.0, "irq": 300.0, "system": 0.0, "user": 0.0,
            "idle": 0.0}
    with pytest.raises(ConservationError, match=r"CPU 0: .*irq 300.*sum 300\.2"):
        check_cpu_time(Result({"cpus": [{"cpu": 0, "util": util}]}))
    util.update(irq=0.1, idle=0.7)
    check_cpu_time(Result({"cpus": [{"cpu": 0, "util": util}]}))
