"""A sweep on a real Dask cluster on loopback: a worker killed mid-sweep loses nothing,
and the results are identical to the same sweep run on local processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rxlab.cli.main import main

pytest.importorskip("pyarrow")
distributed = pytest.importorskip("distributed")

SWEEP = {
    "name": "dask",
    "base": "default",
    "duration": 0.5,  # ~0.1 s of work per run: long enough to kill a worker mid-run
    "grid": {"nic.queues": [2, 4], "kernel.netdev_max_backlog": [300, 1000]},
    "replications": 3,
}


def _wait_for(pred, timeout: float, what: str, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        for p in procs:
            assert p.poll() is None, f"{what}: a process exited ({p.args})"
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _address(scheduler_file: Path) -> str | None:
    try:
        return json.loads(scheduler_file.read_text())["address"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two single-thread workers (no nanny: a killed worker stays dead)."""
    import rxlab

    rxlab.simulate("default", duration=0.001)  # fill the numba cache before workers start
    procs: dict[str, subprocess.Popen] = {}
    logs = []

    def start(name: str, args: list[str]) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.log", "w")
        logs.append(log)
        p = subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=log,
                             cwd=tmp_path, start_new_session=True)
        procs[name] = p
        return p

    sched_file = tmp_path / "scheduler.json"
    try:
        start("scheduler", ["distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                            "--port", "0", "--no-dashboard",
                            "--scheduler-file", str(sched_file)])
        _wait_for(lambda: _address(sched_file), 60, "the scheduler", procs.values())
        address = _address(sched_file)
        assert address.startswith("tcp://127.0.0.1:")
        for name in ("w1", "w2"):
            start(name, ["distributed.cli.dask_worker", address, "--name", name,
                         "--nthreads", "1", "--nworkers", "1", "--no-nanny",
                         "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "0",
                         "--death-timeout", "60", "--local-directory", str(tmp_path)])
        client = distributed.Client(address, timeout="30s", set_as_default=False)
        client.wait_for_workers(2, timeout=120)
        yield address, client, procs
        client.close()
    finally:
        # one at a time, workers first: a worker told to stop while the scheduler
        # closes can hang in its own close
        for p in reversed(procs.values()):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()


def test_dask_sweep_survives_a_killed_worker_and_matches_local(cluster, tmp_path):
    import pyarrow.parquet as pq

    address, client, procs = cluster
    f = tmp_path / "dask.yaml"
    f.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    out = tmp_path / "dask-out"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "rxlab.cli.main", "sweep", str(f), "--scheduler", address,
         "--out", str(out), "-q", "--no-plots"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    procs["sweep"] = sweep  # stopped by the fixture if the test fails
    runs = out / "runs"

    # once a result is in, kill the worker that is running a task, mid-run
    names = {}  # worker address -> name
    victim_tasks: list[str] = []

    def busy_worker():
        if not (runs.is_dir() and any(runs.glob("*.json"))):
            return False
        for addr, keys in client.processing().items():
            if keys:
                info = client.scheduler_info()["workers"]
                names.update({a: w["name"] for a, w in info.items()})
                victim_tasks.extend(keys)
                names["victim"] = addr
                return True
        return False

    _wait_for(busy_worker, 600, "a busy worker after the first result", [sweep])
    victim_addr = names["victim"]
    victim = names[victim_addr]
    n_before = len(list(runs.glob("*.json")))
    os.killpg(procs[victim].pid, signal.SIGKILL)
    procs[victim].wait(timeout=20)
    assert n_before < 12, "the sweep finished before the worker was killed"

    stdout, stderr = sweep.communicate(timeout=900)
    assert sweep.returncode == 0, stderr
    assert "12 runs (12 run now)" in stdout
    survivor = next(a for a in names if a not in ("victim", victim_addr))
    assert list(client.scheduler_info()["workers"]) == [survivor]

    # every result exactly once
    ids = [r["run_id"] for r in json.loads((out / "sweep.json").read_text())["runs"]]
    assert len(set(ids)) == 12
    assert sorted(p.stem for p in runs.glob("*.json")) == sorted(ids)
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["run_id"] for r in rows) == sorted(ids)
    records = {i: json.loads((runs / f"{i}.json").read_text()) for i in ids}
    # the run the killed worker had in hand was run again on the survivor
    lost = [k.removeprefix("rxlab-run-") for k in victim_tasks]
    assert any(records[i]["worker"] == survivor for i in lost), (lost, victim_addr)
    assert {r["worker"] for r in records.values()} <= {victim_addr, survivor}

    # the same sweep on local processes gives identical results
    local = tmp_path / "local-out"
    assert main(["sweep", str(f), "--jobs", "2", "--out", str(local), "-q", "--no-plots"]) == 0
    for i in ids:
        mine = json.loads((local / "runs" / f"{i}.json").read_text())
        assert mine["result"] == records[i]["result"]
        assert mine["metrics"] == records[i]["metrics"]
    lrows = {r["run_id"]: r for r in pq.read_table(local / "results.parquet").to_pylist()}
    for r in rows:
        a = {k: v for k, v in r.items() if k not in ("wall_s", "worker")}
        b = {k: v for k, v in lrows[r["run_id"]].items() if k not in ("wall_s", "worker")}
        assert a == b


def test_unreachable_scheduler_is_a_one_line_error(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(dict(SWEEP, duration=0.005), sort_keys=False))
    import socket

    with socket.socket() as s:  # a loopback port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = main(["sweep", str(f), "--scheduler", f"tcp://127.0.0.1:{port}",
               "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "cannot reach a Dask scheduler" in err
    assert main(["sweep", str(f), "--scheduler", f"tcp://127.0.0.1:{port}", "--jobs", "2",
                 "--out", str(tmp_path / "o2")]) == 2
    assert "--jobs sets local processes" in capsys.readouterr().err
