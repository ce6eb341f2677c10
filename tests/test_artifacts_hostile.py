"""The hostile cases of issue 33 that are not one command line of tests/support/hostile_cases.py:
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
from support.one_line import cli_error
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


# ----------------------------------------------------------------------- compile cache

TINY = """
import sys
import rxlab  # noqa: F401  (installs the cache guard)
from numba import njit

@njit(cache=True)
def plus_one(x):
    return x + 1

print(plus_one(41))
"""

DAMAGE = {
    "truncated": lambda b: b[: len(b) // 3],
    "zeroed": lambda b: bytes(len(b)),
    "garbage": lambda b: os.urandom(len(b)),
    "empty": lambda b: b"",
}


def _tiny(tmp_path, cache) -> subprocess.CompletedProcess:
    (tmp_path / "tiny.py").write_text(TINY)
    return subprocess.run([sys.executable, "tiny.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, NUMBA_CACHE_DIR=str(cache)))


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("suffix", ["nbc", "nbi"], ids=["data", "index"])
def test_a_damaged_cache_entry_is_removed_and_compiled_again(tmp_path, kind, suffix):
    """A cache file truncated, zeroed, emptied or overwritten: the function compiles
    again and the run succeeds; the entry is written anew, so the next run loads it."""
    cache = tmp_path / "cache"
    first = _tiny(tmp_path, cache)
    assert first.returncode == 0 and first.stdout.strip() == "42", first.stderr
    files = sorted(cache.rglob(f"tiny.plus_one-*.{suffix}"))
    assert files
    for f in files:
        f.write_bytes(DAMAGE[kind](f.read_bytes()))
    again = _tiny(tmp_path, cache)
    assert again.returncode == 0 and again.stdout.strip() == "42", again.stderr
    assert "Traceback" not in again.stderr
    index = next(cache.rglob("tiny.plus_one-*.nbi"))
    data = next(cache.rglob("tiny.plus_one-*.nbc"))
    import pickle

    with open(index, "rb") as fh:  # whole again: numba's version, then the index
        pickle.load(fh)
    pickle.loads(data.read_bytes())


def test_a_cache_entry_that_cannot_be_removed_or_saved_runs_from_memory(tmp_path):
    """The index is a folder: it neither loads, nor goes, nor takes a save; the function
    still compiles and runs (the code stays in memory), every time."""
    cache = tmp_path / "cache"
    assert _tiny(tmp_path, cache).returncode == 0
    for index in cache.rglob("tiny.plus_one-*.nbi"):
        index.unlink()
        index.mkdir()
    for _ in range(2):
        p = _tiny(tmp_path, cache)
        assert p.returncode == 0 and p.stdout.strip() == "42", p.stderr
        assert "Traceback" not in p.stderr


def _current_cache() -> Path:
    import rxlab  # noqa: F401  (configures NUMBA_CACHE_DIR: <base>/<source key>)

    return Path(os.environ["NUMBA_CACHE_DIR"])


def test_a_truncated_loop_cache_file_recompiles_and_the_run_succeeds(tmp_path):
    """The real thing: the loop module's shaping function's code and its NIC-wait
    function's index truncated in a copy of this install's cache; `rxlab run` says it
    compiles them again and gives the result a clean cache gives. (The same repair of
    the loop itself, ``rx_loop.run``, costs a whole cold compile, minutes.)"""
    import shutil

    clean = rxlab("run", "default", "--duration", "0.001", "--json", timeout=900)
    assert clean.returncode == 0, clean.stderr[-2000:]
    from rxlab import _cache

    cache = tmp_path / "cache"
    shutil.copytree(_current_cache(), cache / _cache.source_key())
    for pattern in ("rx_loop.shape-*.nbc", "rx_loop.nic_wait-*.nbi"):
        for f in cache.rglob(pattern):
            f.write_bytes(f.read_bytes()[:100])
    p = rxlab("run", "default", "--duration", "0.001", "--json",
              env={"NUMBA_CACHE_DIR": str(cache)}, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout == clean.stdout
    assert "Traceback" not in p.stderr
    assert "rxlab.kernel.rx_loop.shape again" in p.stderr, p.stderr
    assert "rxlab.kernel.rx_loop.nic_wait again" in p.stderr, p.stderr
    p = rxlab("run", "default", "--duration", "0.001", "--json",
              env={"NUMBA_CACHE_DIR": str(cache)})
    assert p.returncode == 0 and "again" not in p.stderr, p.stderr  # repaired for good


def _numba_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*.nb[ic]"))


def test_an_unwritable_cache_folder_compiles_in_memory_and_writes_nothing_in_the_tree(
        tmp_path):
    """numba falls back to __pycache__ beside the source when its folder cannot be
    written (an editable install wrote 212 files into rxlab/**): rxlab turns caching off
    instead. A file where the folder should be stands for a read-only folder, which
    root could still write."""
    (tmp_path / "afile").write_text("")
    cache = tmp_path / "afile" / "cache"
    tree = ROOT / "rxlab"
    before = _numba_files(tree)
    p = _tiny(tmp_path, cache)
    assert p.returncode == 0 and p.stdout.strip() == "42", p.stderr
    p = rxlab("hash", "10.0.0.1", "10.0.0.2", "1", "2", "--json",
              env={"NUMBA_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr
    assert _numba_files(tree) == before
    assert _numba_files(tmp_path) == []


def test_the_in_memory_compile_is_announced(monkeypatch, capsys):
    from rxlab import _cache

    monkeypatch.setattr(_cache, "_announced", False)
    monkeypatch.setattr(_cache, "cache_off", "/x/y cannot be written: Read-only file system")
    monkeypatch.setenv(_cache.NOTICE_ENV, str(os.getpid()))
    _cache.announce_compile()
    err = capsys.readouterr().err
    assert err.startswith("rxlab: compiling the event loop in memory") and "/x/y" in err
    assert len(err.strip().splitlines()) == 1


def test_cache_prune_keeps_a_folder_holding_a_users_file(tmp_path):
    """--prune --yes deleted a folder under the cache with the user's notes.txt in it:
    a key folder is deleted only when it holds numba's files alone."""
    numba_only, with_notes, with_link = (tmp_path / k for k in (
        "0123456789abcdef", "fedcba9876543210", "00000000ffffffff"))
    for d in (numba_only, with_notes, with_link):
        (d / "kernel_x").mkdir(parents=True)
        (d / "kernel_x" / "f-1.py311.nbi").write_bytes(b"i")
        (d / "kernel_x" / "f-1.py311.1.nbc").write_bytes(b"d")
        (d / "kernel_x" / "f-1.py311.nbi.tmp.0123abcd0123abcd").write_bytes(b"t")
    (with_notes / "notes.txt").write_text("mine")
    (with_link / "kernel_x" / "home").symlink_to(tmp_path)
    p = rxlab("cache", "--dir", tmp_path, "--prune", "--yes", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["deleted"] == ["0123456789abcdef"]
    assert sorted(d["kept"]) == ["00000000ffffffff", "fedcba9876543210"]
    assert not numba_only.exists() and (with_notes / "notes.txt").read_text() == "mine"
    assert (with_link / "kernel_x" / "home").is_symlink()
    p = rxlab("cache", "--dir", tmp_path, "--prune")
    assert "kept fedcba9876543210: it holds files numba did not write (notes.txt)" in p.stdout


# ------------------------------------------------------------- saved results (explain)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """`rxlab run --out`'s folder: result.json and the scenario.yaml it came from."""
    out = tmp_path_factory.mktemp("saved") / "res"
    p = rxlab("run", "default", "--duration", "0.01", "--out", out)
    assert p.returncode == 0, p.stderr[-2000:]
    return out


def _copy(saved: Path, tmp_path: Path) -> Path:
    import shutil

    d = tmp_path / "res"
    shutil.copytree(saved, d)
    return d


def _edit(fn):
    def write(rj: Path):
        data = json.loads(rj.read_text())
        fn(data)
        rj.write_text(json.dumps(data))
    return write


def _deep(rj: Path):
    rj.write_text("[" * 100_000 + "]" * 100_000)


def _fifo(rj: Path):
    rj.unlink()
    os.mkfifo(rj)


def _dev_zero(rj: Path):
    rj.unlink()
    rj.symlink_to("/dev/zero")


SAVED_CASES = {
    "no-latency": (_edit(lambda d: d.pop("latency_ns")), "no latency_ns"),
    "no-util": (_edit(lambda d: d["cpus"][1].pop("util")), "cpus[1]: no 'util'"),
    "string-for-object": (_edit(lambda d: d.__setitem__("packets", "x")),
                          "packets: \"x\" where the result has an object"),
    "config-null": (_edit(lambda d: d.__setitem__("config", None)), "config: null"),
    "queues-int": (_edit(lambda d: d.__setitem__("queues", 5)), "queues: 5 where"),
    "apps-null": (_edit(lambda d: d.__setitem__("apps", None)), "apps: null"),
    "cpu-empty": (_edit(lambda d: d["cpus"].__setitem__(0, {})), "cpus[0]: no 'cpu'"),
    "cpu-out-of-range": (_edit(lambda d: d["apps"][0].__setitem__("cpu", 99)),
                         "apps[0].cpu: CPU 99 is not in cpus"),
    "share-over-1": (_edit(lambda d: d["cpus"][0]["util"].__setitem__("user", 9.98)),
                     "cpus[0].util.user: 9.98 where the result has a share"),
    "bool-count": (_edit(lambda d: d["packets"].__setitem__("offered", True)),
                   "packets.offered: true"),
    "nan": (lambda rj: rj.write_text(rj.read_text().replace('"idle": 0', '"idle": NaN', 1)),
            "NaN"),
    "nested-100000": (_deep, "nested deeper than 32 levels"),
    "fifo": (_fifo, "not a regular file"),
    "dev-zero": (_dev_zero, "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(SAVED_CASES))
def test_explain_on_a_damaged_result_is_one_line(saved, tmp_path, case):
    """Each was a traceback (KeyError, TypeError, RecursionError, MemoryError) or a hang
    (a FIFO): now one line naming result.json and the field, exit 2, within seconds."""
    d = _copy(saved, tmp_path)
    damage, needle = SAVED_CASES[case]
    damage(d / "result.json")
    p = rxlab("explain", "drops", d, "--json", timeout=60)
    usage(p, "result.json", needle)


def _notes(p) -> str:
    assert p.returncode == 0, p.stderr[-2000:]
    return " ".join(json.loads(p.stdout)["notes"])


def test_explain_replays_a_saved_result_bit_for_bit(saved):
    assert "gives the saved result bit for bit" in _notes(
        rxlab("explain", "drops", saved, "--json"))


@pytest.mark.parametrize("edit, needle", [
    (lambda t: t.replace("duration: 0.01", "duration: 3600"),
     "runs 3600 s of traffic, more than explain runs (60 s): not run again"),
    (lambda t: t.replace("duration: 0.01", "duration: 0.02"),
     "runs 0.02 s of traffic, the result 0.01 s: not run again"),
    (lambda t: t.replace("pps: 800000", "pps: 80000000"),
     "offers more than the result's 7,863 packets; stopped there"),
], ids=["3600s", "other-duration", "more-packets"])
def test_a_tampered_scenario_is_not_replayed_past_the_result(saved, tmp_path, edit, needle):
    """A scenario.yaml changed to a 3600 s run hung explain (the replay ran it): the
    replay is bounded as a fresh explain run is (60 s), by the result's own duration and
    packets, and the note says why the flows are not named."""
    import time

    d = _copy(saved, tmp_path)
    sc = d / "scenario.yaml"
    text = sc.read_text()
    assert edit(text) != text
    sc.write_text(edit(text))
    t0 = time.monotonic()
    notes = _notes(rxlab("explain", "drops", d, "--json", timeout=120))
    assert needle in notes and time.monotonic() - t0 < 60


# ------------------------------------------------------------ sweep folders (report)

TINY_SWEEP = """name: tiny
base: default
duration: 0.002
grid:
  nic.queues: [1, 2]
replications: 2
metrics: [delivered_pps, drop_fraction]
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sweep")
    (d / "w.yaml").write_text(TINY_SWEEP)
    p = rxlab("sweep", d / "w.yaml", "--out", d / "sw", "-j", "1", "-q")
    assert p.returncode == 0, p.stderr[-2000:]
    return d / "sw"


def _table(fn):
    def damage(d: Path):
        t = d / "results.parquet"
        fn(t)
    return damage


def _runs_only(fn):
    """Without the table, report reads the run files: damage the first of them."""
    def damage(d: Path):
        (d / "results.parquet").unlink()
        fn(sorted((d / "runs").glob("*.json"))[0])
    return damage


def _run_edit(edit):
    def fn(r: Path):
        rec = json.loads(r.read_text())
        edit(rec)
        r.write_text(json.dumps(rec))
    return fn


def _spec_edit(edit):
    def damage(d: Path):
        s = json.loads((d / "sweep.json").read_text())
        edit(s)
        (d / "sweep.json").write_text(json.dumps(s))
    return damage


def _bad_types(t: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pq.read_table(t).to_pylist()
    for r in rows:
        r["delivered_pps"] = "lots"
    pq.write_table(pa.Table.from_pylist(rows), t)


def _mkfifo(p: Path):
    p.unlink()
    os.mkfifo(p)


REPORT_CASES = {
    "table-truncated": (_table(lambda t: t.write_bytes(t.read_bytes()[:200])),
                        "results.parquet: not a readable Parquet table"),
    "table-zeroed": (_table(lambda t: t.write_bytes(bytes(t.stat().st_size))),
                     "results.parquet: not a readable Parquet table"),
    "table-garbage": (_table(lambda t: t.write_bytes(os.urandom(t.stat().st_size))),
                      "results.parquet: not a readable Parquet table"),
    "table-empty": (_table(lambda t: t.write_bytes(b"")), "Parquet file size is 0 bytes"),
    "table-fifo": (_table(_mkfifo), "results.parquet: not a regular file"),
    "table-metric-text": (_table(_bad_types), "delivered_pps: 'lots' is not a number"),
    "run-metrics-string": (_runs_only(_run_edit(lambda r: r.__setitem__("metrics", "x"))),
                           "metrics: not an object"),
    "run-params-null": (_runs_only(_run_edit(lambda r: r.__setitem__("params", None))),
                        "params: not an object"),
    "run-point-text": (_runs_only(_run_edit(lambda r: r.__setitem__("point", "zz"))),
                       "point: 'zz' is not an integer"),
    "run-nested": (_runs_only(lambda r: r.write_text("[" * 100_000 + "]" * 100_000)),
                   "nested deeper than 32 levels"),
    "run-fifo": (_runs_only(_mkfifo), "not a regular file"),
    "spec-nested": (lambda d: (d / "sweep.json").write_text("[" * 100_000 + "]" * 100_000),
                    "sweep.json: not a sweep record written by `rxlab sweep` (nested deeper"),
    "spec-points-int": (_spec_edit(lambda s: s.__setitem__("points", [5])),
                        "points[0]: not an object"),
    "spec-metric-list": (_spec_edit(lambda s: s.__setitem__("metrics", [[1]])),
                         "metrics[0]: not text"),
}


@pytest.mark.parametrize("case", sorted(REPORT_CASES))
def test_report_on_a_damaged_sweep_folder_is_one_line(sweep_dir, tmp_path, case):
    """Each was a traceback (ArrowInvalid, OSError from thrift, KeyError, TypeError,
    RecursionError) or a hang (a run file that is a FIFO)."""
    import shutil

    d = tmp_path / "sw"
    shutil.copytree(sweep_dir, d)
    damage, needle = REPORT_CASES[case]
    damage(d)
    p = rxlab("report", d, "-o", tmp_path / "r.html", timeout=60)
    usage(p, needle)
    assert not (tmp_path / "r.html").exists()


def test_report_on_the_whole_folder_still_works(sweep_dir, tmp_path):
    p = rxlab("report", sweep_dir, "-o", tmp_path / "r.html")
    assert p.returncode == 0, p.stderr
    assert "rxlab sweep report, 4 runs" in (tmp_path / "r.html").read_text()


# ---------------------------------------------------------------------------- signals


def _session(sid: int) -> list[int]:
    import psutil

    alive = []
    for q in psutil.process_iter(["status"]):
        try:
            if os.getsid(q.pid) == sid and q.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(q.pid)
        except (ProcessLookupError, PermissionError):
            pass
    return alive


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_sigint_ends_a_sweep_of_100000_runs_within_5_s(tmp_path, sig):
    """Ctrl-C (SIGINT to the process group) once the runs flow: the driver waited with
    concurrent.futures.wait over 100,000 futures, and an interrupt inside it left their
    locks held, so the pool's shutdown slept for good (3 of 3 tries). Now: exit 130 within
    5 s with one line, and no process of the session left; SIGTERM to the driver: 143."""
    import signal
    import time

    signum = getattr(signal, sig)

    pytest.importorskip("psutil")
    (tmp_path / "w.yaml").write_text(
        "name: big\nbase: default\nduration: 0.001\nreplications: 100000\n")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rxlab.cli.main", "sweep", str(tmp_path / "w.yaml"), "--out",
         str(out), "--jobs", "2", "-q", "--no-plots"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "stderr", "w"),
        start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600
        while len(list((out / "runs").glob("*.json")) if (out / "runs").is_dir() else []) < 4:
            assert proc.poll() is None, (tmp_path / "stderr").read_text()
            assert time.monotonic() < deadline, "no run finished in 600 s"
            time.sleep(0.05)
        t0 = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)  # as Ctrl-C sends it: the workers ignore it
        else:
            os.kill(proc.pid, signum)
        code = proc.wait(timeout=30)
        assert time.monotonic() - t0 < 5
        assert code == (130 if signum == signal.SIGINT else 143)
        deadline = time.monotonic() + 5
        while _session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _session(proc.pid) == []
    finally:
        for pid in _session(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.wait()
    err = cli_error((tmp_path / "stderr").read_text())
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    assert err.startswith(f"rxlab: {word}") and "of 100000 runs finished" in err


# ----------------------------------------------------------- the terminal, the locale


def _scenario(tmp_path: Path, name: str) -> Path:
    import yaml

    data = yaml.safe_load((ROOT / "rxlab" / "scenarios" / "default.yaml").read_text())
    data["name"], data["duration"] = name, 0.001
    data["apps"][0]["name"] = name
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=False))  # \uDC80 as an escape
    return path


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 32 and c not in "\n") or 0x7f <= ord(c) < 0xa0})


@pytest.mark.parametrize("name, shown", [
    ("evil\x1b[31mRED\x1b[0m\x07", "evil\\x1b[31mRED\\x1b[0m\\x07"),
    ("csi\x9b2J", "csi\\x9b2J"),
    ("two\nlines\r", "two\\nlines\\r"),
    ("sur\udc80x", "sur\\udc80x"),
    ("a[/]b[bold]c", "a[/]b[bold]c"),
], ids=["ansi-bell", "c1-csi", "newline-cr", "lone-surrogate", "rich-markup"])
def test_a_hostile_scenario_name_is_escaped_on_the_terminal(tmp_path, name, shown):
    """An ANSI escape recoloured the terminal, a lone surrogate raised
    UnicodeEncodeError, '[/]' raised rich's MarkupError: the tables show each as typed,
    escaped; --json keeps the name itself (JSON escapes it)."""
    s = _scenario(tmp_path, name)
    p = rxlab("run", s, env={"PYTHONIOENCODING": "utf-8"})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert _raw_controls(p.stdout) == []
    assert shown in p.stdout
    assert p.stdout.count(shown) >= 2  # the title and the app's row
    p = rxlab("run", s, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["scenario"] == name
    p = rxlab("explain", "drops", s, "--duration", "0.001")
    assert p.returncode == 0 and _raw_controls(p.stdout) == [] and shown.split("[")[0] in p.stdout


def test_an_error_line_escapes_control_characters(tmp_path):
    p = rxlab("run", tmp_path / "no\x1b[31mpe\nx.yaml")
    line = usage(p, "no\\x1b[31mpe\\nx.yaml: no such scenario file")
    assert _raw_controls(line) == []


@pytest.mark.parametrize("argv", [
    ("run", "default", "--duration", "0.001"),
    ("run", "{s}"),
    ("explain", "drops", "{s}", "--duration", "0.001"),
    ("list",),
], ids=["run", "run-unicode-name", "explain", "list"])
def test_an_ascii_locale_works(tmp_path, argv):
    """PYTHONIOENCODING=ascii gave a UnicodeEncodeError traceback: what ASCII cannot show
    is written as a backslash escape."""
    s = _scenario(tmp_path, "caf\xe9 \u2603")
    p = rxlab(*(str(s) if a == "{s}" else a for a in argv),
              env={"PYTHONIOENCODING": "ascii"})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stdout.isascii()
    if "{s}" in argv:
        assert "caf\\xe9 \\u2603" in p.stdout


def test_a_sweep_named_with_a_surrogate_and_an_escape_reports(tmp_path):
    """The HTML report raised UnicodeEncodeError on a lone surrogate in the sweep's
    name; both it and an ANSI escape are shown escaped."""
    (tmp_path / "w.yaml").write_text('name: "s\\udc80\\e[31mw"\nbase: default\n'
                                     "duration: 0.001\ngrid: {nic.queues: [1, 2]}\n")
    p = rxlab("sweep", tmp_path / "w.yaml", "--out", tmp_path / "sw", "-j", "1", "-q")
    assert p.returncode == 0, p.stderr[-2000:]
    assert _raw_controls(p.stdout) == []
    (tmp_path / "m.yaml").write_text('name: "m[/]x"\nbase: default\nduration: 0.001\n'
                                     "grid: {nic.queues: [1, 2]}\n")
    p = rxlab("sweep", tmp_path / "m.yaml", "--out", tmp_path / "m", "-j", "1")
    assert p.returncode == 0 and "sweep m[/]x: mean" in p.stdout, p.stderr[-2000:]
    assert _raw_controls(p.stderr) == []  # the progress bar: ESC only from rich, if any
    p = rxlab("report", tmp_path / "sw", "-o", tmp_path / "r.html")
    assert p.returncode == 0, p.stderr[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "s\\udc80\\x1b[31mw" in page and "\x1b" not in page
