"""One sweep per output folder, no process left behind by a killed driver, and sweep files
read safely (one line, exit 2, nothing written)."""

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
from support.one_line import cli_error

from rxlab.cli.main import main
from rxlab.errors import UsageError
from rxlab.sweep import runner, store
from rxlab.sweep.spec import parse_sweep

pytest.importorskip("pyarrow")
psutil = pytest.importorskip("psutil")

# 8 runs of ~1 s each on two workers: long enough to be seen running on an idle machine
SLOW = {"name": "slow", "base": "default", "duration": 2.0, "replications": 2,
        "grid": {"nic.queues": [2, 4], "kernel.netdev_max_backlog": [300, 1000]}}
OTHER = {"name": "other", "base": "default", "duration": 0.005,
         "grid": {"nic.queues": [1, 2]}}


def _file(tmp_path: Path, spec: dict) -> Path:
    f = tmp_path / f"{spec['name']}.yaml"
    f.write_text(yaml.safe_dump(spec, sort_keys=False))
    return f


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell may start the suite with it ignored


def _start(tmp_path: Path, f: Path, out: Path) -> subprocess.Popen:
    """The CLI in a session of its own (its id is the driver's pid), output to files."""
    return subprocess.Popen(
        [sys.executable, "-m", "rxlab.cli.main", "sweep", str(f), "--out", str(out),
         "--jobs", "2", "-q", "--no-plots"],
        stdout=open(tmp_path / "stdout", "w"), stderr=open(tmp_path / "stderr", "w"),
        start_new_session=True, preexec_fn=_sigint_default)


def _session(sid: int) -> list:
    """Processes of session ``sid`` that are not zombies."""
    alive = []
    for q in psutil.process_iter(["status"]):
        try:
            if os.getsid(q.pid) == sid and q.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(q)
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def _kill_session(sid: int) -> None:
    for q in _session(sid):
        try:
            q.kill()
        except psutil.Error:
            pass


def _wait_for(pred, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert proc.poll() is None, f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _workers(proc: subprocess.Popen) -> list:
    """The pool's workers: forked by the forkserver, a child of the driver."""
    try:
        return [c for c in psutil.Process(proc.pid).children(recursive=True)
                if c.ppid() != proc.pid]
    except psutil.Error:
        return []


@pytest.fixture(scope="module")
def warm():
    import rxlab

    rxlab.simulate("default", duration=0.001)  # the numba cache, before workers start


# ---------------------------------------------------------------- the lock itself
def test_lock_is_exclusive_names_its_holder_and_dies_with_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert store.writer(out) is None
    with store.lock(out):
        assert store.writer(out) == os.getpid()
        with pytest.raises(UsageError, match=rf"another sweep \(pid {os.getpid()}\) is writing "
                                             "this folder; wait for it or use another --out"):
            with store.lock(out):
                pass
    assert store.writer(out) is None

    # held by another process, which is then SIGKILLed: the kernel drops the lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
         "from rxlab.sweep import store\nwith store.lock(Path(sys.argv[1])):\n"
         "    print('locked', flush=True)\n    time.sleep(600)\n", str(out)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert store.writer(out) == holder.pid
        with pytest.raises(UsageError, match=rf"another sweep \(pid {holder.pid}\)"):
            with store.lock(out):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert store.writer(out) is None
    with store.lock(out):
        assert store.writer(out) == os.getpid()


# ---------------------------------------------------------------- two sweeps, one folder
def test_second_sweep_and_resume_on_a_busy_folder_are_refused(tmp_path, warm, capsys):
    import pyarrow.parquet as pq

    first, other = _file(tmp_path, SLOW), _file(tmp_path, OTHER)
    out = tmp_path / "out"
    proc = _start(tmp_path, first, out)
    try:
        _wait_for(lambda: store.writer(out) == proc.pid, proc, "the first sweep's lock")
        busy = f"{out}/: another sweep (pid {proc.pid}) is writing this folder"
        for argv in (["sweep", str(other), "--out", str(out), "-q"],
                     ["sweep", str(first), "--out", str(out), "-q", "--resume"],
                     ["sweep", str(other), "--out", str(out), "-q", "--replace"]):
            assert main(argv) == 2, argv
            assert busy in cli_error(capsys.readouterr().err), argv
        assert proc.poll() is None, "the first sweep ended before the second was tried"
        assert proc.wait(timeout=600) == 0, (tmp_path / "stderr").read_text()
    finally:
        _kill_session(proc.pid)
        proc.wait()

    # the first sweep is whole: its record, its runs, its table
    ids = [r.run_id for r in parse_sweep(SLOW).runs]
    assert [r["run_id"] for r in json.loads((out / "sweep.json").read_text())["runs"]] == ids
    assert sorted(p.stem for p in (out / "runs").glob("*.json")) == sorted(ids)
    assert sorted(r["run_id"] for r in pq.read_table(out / "results.parquet").to_pylist()) \
        == sorted(ids)
    assert not list((out / "runs").glob(".*"))
    page = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    assert "wrote" in capsys.readouterr().out and "rxlab sweep: slow" in page.read_text()
    # a report taken while a sweep holds the folder says the page may be partial
    with store.lock(out):
        assert main(["report", str(out), "-o", str(page)]) == 0
    assert f"a sweep (pid {os.getpid()}) is still writing" in capsys.readouterr().out


def _fake_sweep(out: Path, spec: dict, finished: int) -> list[str]:
    """A sweep's folder as `rxlab sweep` leaves it, without simulating: its record, some
    run files, a table, a summary and a plot (contents beside the point here)."""
    sw = parse_sweep(spec)
    out.mkdir(parents=True, exist_ok=True)
    store.write_spec(out, sw.to_json())
    for r in sw.runs[:finished]:  # whole records: a sweep reruns a partial one
        store.write_run(out, {"run_id": r.run_id, "point": r.point, "seed": r.seed,
                              "rep": r.rep, "params": r.params, "metrics": {}})
    for name in (store.TABLE, store.SUMMARY, store.REPORT, f"{store.PLOTS}/a.png"):
        store.atomic_write(out / name, b"x")
    return [r.run_id for r in sw.runs]


def test_another_sweeps_folder_is_refused_unless_replaced(tmp_path, capsys):
    out = tmp_path / "out"
    old_ids = _fake_sweep(out, SLOW, finished=3)
    (out / "notes.txt").write_text("mine")
    other = _file(tmp_path, OTHER)

    def files() -> list:  # the lock file a refused sweep opened is the only new name
        return sorted(p.relative_to(out) for p in out.rglob("*") if p.name != store.LOCK)

    before = files()

    assert main(["sweep", str(other), "--out", str(out), "-q"]) == 2
    err = cli_error(capsys.readouterr().err)
    assert "holds another sweep (slow: 3 of 8 runs)" in err and "--replace" in err
    assert main(["sweep", str(_file(tmp_path, SLOW)), "--out", str(out), "-q"]) == 2
    assert "already holds results of this sweep; add --resume" in capsys.readouterr().err
    assert main(["sweep", str(other), "--out", str(out), "--resume", "--replace"]) == 2
    assert "give one of the two" in cli_error(capsys.readouterr().err)
    assert files() == before  # nothing touched

    # --resume with another sweep: its runs stay (ids are shared), its table and plots go
    new = parse_sweep(OTHER)
    runner._claim(new, out, resume=True, replace=False)
    assert store.finished(out, old_ids) == set(old_ids[:3])
    for name in (store.TABLE, store.SUMMARY, store.REPORT, store.PLOTS):
        assert not (out / name).exists(), name
    # --replace: everything a sweep wrote goes, nothing else
    _fake_sweep(out, SLOW, finished=3)
    runner._claim(new, out, resume=False, replace=True)
    assert {p.name for p in out.iterdir()} - {store.LOCK} == {"notes.txt"}


# ---------------------------------------------------------------- a killed driver
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_driver_leaves_no_process(tmp_path, warm, sig):
    out = tmp_path / "out"
    proc = _start(tmp_path, _file(tmp_path, SLOW), out)
    try:
        _wait_for(lambda: len(_workers(proc)) >= 2, proc, "two workers")
        members = _session(proc.pid)
        assert len(members) >= 5, members  # driver, resource tracker, forkserver, 2 workers
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while _session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [(q.pid, q.cmdline()) for q in _session(proc.pid)]
        assert not left, left
    finally:
        _kill_session(proc.pid)
        proc.wait()
    assert store.writer(out) is None  # the lock went with the driver
    assert not list(out.glob("runs/.*"))  # no temporary file left
    if sig == signal.SIGTERM:
        assert code == 143
        err = cli_error((tmp_path / "stderr").read_text())
        assert err.startswith("rxlab: terminated (SIGTERM): ") and "of 8 runs finished" in err
        assert "--resume" in err
    else:
        assert code == -signal.SIGKILL


# ---------------------------------------------------------------- sweep files
BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
                 + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]"
                    for i in range(1, 9)]
                 + ["base: default", "description: *a8"]) + "\n"
BAD_FILES = [
    (b"base: default\nname: caf\xe9\n", "not UTF-8 text (byte 23)"),
    (b"base: default\x00\n", "contains a NUL byte"),
    (b"[" * 20000 + b"]" * 20000, "nested deeper than"),
    (BOMB.encode(), "aliases expand to more than"),
    (b"base: default\ngrid: &g {nic.queues: *g}\n", "a cycle"),
    (b"- base: default\n", "the top level must be a mapping"),
    (b"just text\n", "the top level must be a mapping"),
    (b"", "the top level must be a mapping"),
    (b"base: default\nname: a\nname: b\n", "key 'name' given twice"),
    (b"base: default\nreplications: 100000000\n", "more than a sweep may have (100,000)"),
    (b"base: default\nreplications: 20000\ngrid: {nic.queues: [1, 2, 3, 4, 5, 6]}\n",
     "6 points x 20000 seeds make 120,000 runs"),
    (b"base: default\nname: a/b\n", "sweep.name: 'a/b' has a '/'"),
]


@pytest.mark.parametrize("text,msg", BAD_FILES, ids=[m for _, m in BAD_FILES])
def test_bad_sweep_files_are_one_line(tmp_path, monkeypatch, capsys, text, msg):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "s.yaml"
    f.write_bytes(text)
    argv = ["sweep", str(f), "-q"] + ([] if "sweep.name" in msg else ["--out", "o"])
    assert main(argv) == 2
    assert msg in cli_error(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # nothing written


@pytest.mark.parametrize("path,msg", [("/dev/zero", "not a regular file"),
                                      (".", "is a directory"),
                                      ("nope.yaml", "no such sweep file")])
def test_sweep_file_that_is_no_file(tmp_path, monkeypatch, capsys, path, msg):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", path, "--out", "o", "-q"]) == 2
    assert msg in cli_error(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["[1]", "{x", '{"runs": [{}], "base": {}, "param_paths": [], '
                                  '"metrics": [], "points": [], "seeds": []}'])
def test_damaged_sweep_record_is_one_line(tmp_path, capsys, text):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(text)
    assert main(["report", str(out)]) == 2
    assert "sweep.json: not a sweep record written by `rxlab sweep`" in \
        cli_error(capsys.readouterr().err)
    store.write_run(out, {"run_id": "0123456789abcdef"})  # results beside it: refused
    assert main(["sweep", str(_file(tmp_path, OTHER)), "--out", str(out), "-q"]) == 2
    assert "holds sweep results but no readable sweep.json" in \
        cli_error(capsys.readouterr().err)
