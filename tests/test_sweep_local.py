"""Local sweeps: outputs, resume after an interrupt, and the HTML report in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from rxlab.cli.main import main

pytest.importorskip("pyarrow")

SWEEP = {
    "name": "tiny",
    "base": "default",
    "duration": 0.005,
    "grid": {"nic.queues": [1, 4], "traffic.groups.0.rate.pps": [400000, 3200000]},
    "replications": 2,
}


@pytest.fixture(scope="module")
def warm():
    """Compile (or load from the cache) the jitted loop once, before workers start."""
    import rxlab

    rxlab.simulate("default", duration=0.001)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, warm):
    d = tmp_path_factory.mktemp("tiny")
    f = d / "tiny.yaml"
    f.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    out = d / "out"
    assert main(["sweep", str(f), "--jobs", "2", "--out", str(out), "-q"]) == 0
    return f, out


def _sigint_default() -> None:
    # a shell starts background jobs with SIGINT ignored, and exec keeps that: this test
    # sends Ctrl-C, so the child must get it however the test suite itself was started
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def running(cmd: list[str]):
    """A CLI subprocess in its own session; killed with its workers if the test fails."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_sigint_default)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def planned(out: Path) -> list[str]:
    return [r["run_id"] for r in json.loads((out / "sweep.json").read_text())["runs"]]


def test_local_sweep_writes_every_run_once(tiny, capsys):
    import pyarrow.parquet as pq

    f, out = tiny
    ids = planned(out)
    assert len(ids) == 8 and len(set(ids)) == 8
    assert sorted(p.stem for p in (out / "runs").glob("*.json")) == sorted(ids)
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["run_id"] for r in rows) == sorted(ids)
    r0 = rows[0]
    for col in ("seed", "nic.queues", "traffic.groups.0.rate.pps", "delivered_pps",
                "drop_fraction", "latency_p99_ns", "softirq_util_max", "wall_s"):
        assert col in r0
    rec = json.loads((out / "runs" / f"{r0['run_id']}.json").read_text())
    assert rec["params"] == {"nic.queues": r0["nic.queues"],
                             "traffic.groups.0.rate.pps": r0["traffic.groups.0.rate.pps"]}
    assert rec["result"]["seed"] == r0["seed"]
    assert rec["result"]["packets"]["offered"] == r0["offered"]
    # one queue cannot take 3.2 Mpps: the sweep sees drops there and none at 400 kpps
    by = {(r["nic.queues"], r["traffic.groups.0.rate.pps"]): r for r in rows}
    assert by[(1, 3200000)]["drop_fraction"] > 0 and by[(4, 400000)]["dropped"] == 0
    summary = (out / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + 4 and "delivered_pps_ci95" in summary[0]
    assert len(list((out / "plots").glob("*.png"))) == 4 * 2 + 4  # lines + heatmaps

    # the same --out again needs --resume; with it, nothing is run twice
    assert main(["sweep", str(f), "--out", str(out), "-q"]) == 2
    assert "add --resume" in capsys.readouterr().err
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    assert main(["sweep", str(f), "--out", str(out), "-q", "--resume", "--no-plots"]) == 0
    assert "8 runs (0 run now, 8 already finished)" in capsys.readouterr().out
    assert before == {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}


def test_interrupt_then_resume(tmp_path, warm):
    """Ctrl-C a local sweep part-way, then --resume: finished runs are kept, none repeats."""
    spec = dict(SWEEP, name="slow", duration=0.5, replications=3,
                grid={"nic.queues": [2, 4], "kernel.netdev_max_backlog": [300, 1000]})
    f = tmp_path / "slow.yaml"
    f.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "rxlab.cli.main", "sweep", str(f), "--out", str(out),
           "--jobs", "1", "-q", "--no-plots"]
    runs = out / "runs"
    with running(cmd) as proc:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if runs.is_dir() and len(list(runs.glob("*.json"))) >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and err.startswith("rxlab: interrupted: ") and "--resume" in err
    done_first = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")}
    ids = planned(out)
    assert 2 <= len(done_first) < len(ids) == 12

    res = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    k = len(done_first)
    assert f"12 runs ({12 - k} run now, {k} already finished)" in res.stdout
    assert sorted(p.stem for p in runs.glob("*.json")) == sorted(ids)
    assert not list(runs.glob(".*"))  # no temporary files left
    for name, mtime in done_first.items():  # the finished runs were not run again
        assert (runs / name).stat().st_mtime_ns == mtime

    import pyarrow.parquet as pq

    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["run_id"] for r in rows) == sorted(ids)



def test_local_worker_killed_mid_sweep_is_retried(tmp_path, warm):
    """SIGKILL one local worker process: the pool is rebuilt, every run written once."""
    psutil = pytest.importorskip("psutil")
    spec = dict(SWEEP, name="crash", duration=0.5, replications=2,
                grid={"nic.queues": [2, 4], "kernel.netdev_max_backlog": [300, 1000]})
    f = tmp_path / "crash.yaml"
    f.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    runs = out / "runs"
    with running([sys.executable, "-m", "rxlab.cli.main", "sweep", str(f), "--out", str(out),
                  "--jobs", "2", "-q", "--no-plots"]) as proc:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if runs.is_dir() and any(runs.glob("*.json")):
                break
            time.sleep(0.02)
        # the workers are forked by the pool's forkserver (a child of the CLI process)
        workers = [c for c in psutil.Process(proc.pid).children(recursive=True)
                   if c.ppid() != proc.pid]
        assert workers and proc.poll() is None
        n_before = len(list(runs.glob("*.json")))
        workers[0].kill()
        stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr
    assert n_before < 8 and "8 runs (8 run now)" in stdout
    ids = planned(out)
    assert sorted(p.stem for p in runs.glob("*.json")) == sorted(ids)



def test_a_failing_run_stops_the_sweep_with_one_line(tmp_path, warm, capsys):
    """A value the schema takes but the build rejects: exit 2, finished runs kept."""
    f = tmp_path / "fail.yaml"
    f.write_text(yaml.safe_dump(dict(SWEEP, grid={"host.cost_profile": ["modern-x86",
                                                                         "no-such-profile"]},
                                     replications=1), sort_keys=False))
    out = tmp_path / "out"
    assert main(["sweep", str(f), "--out", str(out), "--jobs", "1", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "host.cost_profile='no-such-profile', seed 1) failed" in err
    assert "--resume" in err
    assert len(list((out / "runs").glob("*.json"))) == 1


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync"]


def _chromium(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=cwd)
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(tiny, tmp_path):
    _, out = tiny
    page = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    text = page.read_text()
    # self-contained: no scripts, no links or sources off the page
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert text.count('src="data:image/png;base64,') == 12

    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert dom.returncode == 0, dom.stderr
    html = dom.stdout
    for needle in ('id="summary-table"', 'id="runs-table"', 'id="plots"',
                   "rxlab sweep: tiny", "delivered_pps vs nic.queues",
                   "drop_fraction over nic.queues and traffic.groups.0.rate.pps"):
        assert needle in html, needle
    runs_table = html.split('id="runs-table"')[1].split("</table>")[0]
    assert runs_table.count("<tr>") == 1 + 8
    summary_table = html.split('id="summary-table"')[1].split("</table>")[0]
    assert summary_table.count("<tr>") == 1 + 4

    shot = tmp_path / "report.png"
    res = _chromium([f"--screenshot={shot}", "--window-size=1200,1800", page.as_uri()],
                    tmp_path)
    assert res.returncode == 0 and shot.is_file(), res.stderr
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[:2] == (1800, 1200)
    assert img[..., :3].std() > 0.05  # not a blank page: text, tables and plots drew
