"""A sweep's output folder: each run's JSON written atomically, the Parquet table, the summary.

    OUT/sweep.json           the expanded sweep (base scenario, parameter points, runs)
    OUT/runs/<run_id>.json   one per finished run: parameters, seed, metrics, full result
    OUT/results.parquet      one row per run: run_id, point, seed, parameters, metrics
    OUT/summary.csv          one row per parameter point: mean and 95 % CI per metric
    OUT/plots/*.png          metric against each parameter (bands), heatmaps over pairs
    OUT/.sweep.lock          flock(2)ed by the sweep writing the folder; holds its pid

One sweep writes a folder at a time: ``lock`` takes an exclusive ``flock`` on the lock
file for the driver's life, and the kernel drops it when the driver ends, however it
ends (SIGKILL included), so a lock is never stale.

A run's JSON is written to a temporary file and renamed into place, so a file under
``runs/`` is always whole: a run counts as finished exactly when its file exists. Writing
the same run twice (a retried run on a deterministic simulator) replaces identical
content; the table has one row per planned run id.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import io
import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rxlab.errors import UsageError
from rxlab.outfiles import FILE_MODE, answering, replace_file
from rxlab.sweep.metrics import mean_ci

RUNS = "runs"
TABLE = "results.parquet"
SPEC = "sweep.json"
SUMMARY = "summary.csv"
PLOTS = "plots"
REPORT = "report.html"  # where `rxlab report DIR` writes by default
LOCK = ".sweep.lock"
FIXED_COLUMNS = ["run_id", "point", "seed", "rep"]
TAIL_COLUMNS = ["wall_s", "worker"]


OWN = {SPEC, RUNS, TABLE, SUMMARY, PLOTS, REPORT, LOCK}  # what a sweep may find in OUT


def is_own(path: Path) -> bool:
    """A name a sweep writes in its folder (rxlab.outfiles refuses a folder holding others)."""
    return path.name in OWN


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write a file so that readers see the old file or the whole new one, never a part;
    a refusal of the file system is one line naming the file (rxlab.outfiles)."""
    with answering(path, "--out"):
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data)


def run_path(out: Path, run_id: str) -> Path:
    return out / RUNS / f"{run_id}.json"


def write_run(out: Path, record: dict) -> None:
    atomic_write(run_path(out, record["run_id"]), json.dumps(record, sort_keys=True, indent=1))


def read_run(out: Path, run_id: str, strict: bool = False) -> dict | None:
    """A finished run's record, or None when it is missing; a file that is not a whole
    record of that run is None too (a sweep runs it again), or with ``strict`` (a
    report) a one-line UsageError naming the file and what is wrong."""
    from rxlab.inputs import read_json

    path = run_path(out, run_id)
    if not strict and not path.is_file():
        return None
    try:
        if not os.path.lexists(path):
            return None
        rec = read_json(path, "run record of `rxlab sweep`", fix=REPAIR, allow_nan=True)
        why = _bad_run(rec, run_id)
        if why:
            raise UsageError(f"{path}: not a run record of `rxlab sweep` ({why}); {REPAIR}")
    except UsageError:
        if strict:
            raise
        return None
    return rec


REPAIR = "delete it and run the sweep again with --resume"


def _bad_run(rec, run_id: str) -> str:
    """What is wrong with a run record ('' if nothing): the fields a table row takes."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("run_id") != run_id:
        return f"run_id {str(rec.get('run_id'))[:40]!r}, not {run_id!r}"
    for k in ("point", "seed", "rep"):
        if not _count(rec.get(k)):
            return f"{k}: {str(rec.get(k))[:40]!r} is not an integer >= 0"
    for k in ("params", "metrics"):
        if not isinstance(rec.get(k), dict):
            return f"{k}: not an object"
    bad = [m for m, v in rec["metrics"].items() if not (v is None or _number(v))]
    if bad:
        return f"metrics.{bad[0]}: {str(rec['metrics'][bad[0]])[:40]!r} is not a number"
    if not (rec.get("wall_s") is None or _number(rec["wall_s"])):
        return "wall_s is not a number"
    if not (rec.get("worker") is None or isinstance(rec["worker"], str)):
        return "worker is not text"
    return ""


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def finished(out: Path, run_ids: list[str]) -> set[str]:
    return {r for r in run_ids if read_run(out, r) is not None}


def clean_temp(out: Path) -> None:
    """Remove temporary files left by a process killed while writing."""
    for p in (out / RUNS).glob(".*.tmp") if (out / RUNS).is_dir() else []:
        p.unlink(missing_ok=True)


def has_results(out: Path) -> bool:
    return ((out / RUNS).is_dir() and any((out / RUNS).glob("*.json"))) or \
        (out / TABLE).is_file()


# ---------------------------------------------------------------- one writer per folder
LOCK_WAIT_S = 0.5  # a report's probe holds a shared lock for microseconds: retry that long


@contextmanager
def lock(out: Path) -> Iterator[None]:
    """Hold the folder's lock (exclusive ``flock``) for the ``with`` block, else a one-line
    UsageError naming the holder. The descriptor is close-on-exec: no worker inherits it."""
    fd = _open_lock(out, os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise UsageError(f"{out}/: cannot lock the folder ({e.strerror}); "
                                     "use a folder on a local file system") from None
                if time.monotonic() > deadline:
                    pid = _holder_pid(fd)
                    who = f"another sweep (pid {pid})" if pid else "another sweep"
                    raise UsageError(f"{out}/: {who} is writing this folder; wait for it or "
                                     "use another --out") from None
                time.sleep(0.02)
        with answering(out / LOCK, "--out"):  # a full disk: one line, exit 1
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def writer(out: Path) -> int | None:
    """The pid of the sweep writing ``out`` now (0 if unknown), or None when none is."""
    try:
        fd = _open_lock(out, os.O_RDONLY)
    except UsageError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released at close below
        return None
    except OSError:
        return _holder_pid(fd)
    finally:
        os.close(fd)


def _open_lock(out: Path, flags: int) -> int:
    try:
        return os.open(out / LOCK, flags | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
    except OSError as e:
        raise UsageError(f"{out}/: cannot write the lock file {LOCK} ({e.strerror})") from None


def _holder_pid(fd: int) -> int:
    for _ in range(10):  # the holder writes its pid just after taking the lock
        try:
            return int(os.pread(fd, 32, 0).decode() or "x")
        except (OSError, ValueError):
            time.sleep(0.01)
    return 0


# ---------------------------------------------------------------- replacing a sweep
def remove_derived(out: Path) -> None:
    """Remove what is computed from the runs (table, summary, plots, default report), so
    a folder never shows one sweep's table beside another sweep's ``sweep.json``."""
    for name in (TABLE, SUMMARY, REPORT):
        (out / name).unlink(missing_ok=True)
    _remove_files(out / PLOTS, "*.png")


def remove_sweep(out: Path) -> None:
    """Remove everything a sweep wrote in ``out`` (only the names a sweep writes)."""
    remove_derived(out)
    (out / SPEC).unlink(missing_ok=True)
    clean_temp(out)
    _remove_files(out / RUNS, "*.json")


def _remove_files(folder: Path, pattern: str) -> None:
    if not folder.is_dir():
        return
    for p in folder.glob(pattern):
        p.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:  # not empty: something else lives there; leave it
        pass


def write_spec(out: Path, spec: dict) -> None:
    atomic_write(out / SPEC, json.dumps(spec, sort_keys=True, indent=1))


def read_spec(out: Path) -> dict:
    """The expanded sweep recorded in ``out``; a missing or damaged file is a UsageError."""
    from rxlab.inputs import read_json

    path = out / SPEC
    spec = read_json(path, "sweep record written by `rxlab sweep`",
                     fix="run `rxlab sweep FILE --out DIR` again")
    why = _bad_spec(spec)
    if why:
        raise UsageError(f"{path}: not a sweep record written by `rxlab sweep` ({why})")
    return spec


def _bad_spec(spec) -> str:
    """What is wrong with a sweep record ('' if nothing), field by field."""
    if not isinstance(spec, dict):
        return "not a JSON object"
    if not isinstance(spec.get("base"), dict):
        return "base: not an object"
    for k, ok, what in (("param_paths", lambda v: isinstance(v, str), "text"),
                        ("metrics", lambda v: isinstance(v, str), "text"),
                        ("points", lambda v: isinstance(v, dict), "an object"),
                        ("seeds", _count, "an integer >= 0"),
                        ("runs", lambda v: isinstance(v, dict), "an object")):
        if not isinstance(spec.get(k), list):
            return f"{k}: not a list"
        bad = [i for i, v in enumerate(spec[k]) if not ok(v)]
        if bad:
            return f"{k}[{bad[0]}]: not {what}"
    for i, r in enumerate(spec["runs"]):  # a report reads the run ids alone
        if not isinstance(r.get("run_id"), str):
            return f"runs[{i}]: no run_id"
        if "point" in r and not (_count(r["point"]) and r["point"] < len(spec["points"])):
            return f"runs[{i}].point: {str(r['point'])[:40]!r} is not a point of points"
    if not all(isinstance(spec.get(k, ""), str) for k in ("name", "description", "source")):
        return "name, description or source: not text"
    return ""


def recorded(out: Path) -> dict | None:
    """The sweep recorded in ``out`` if it has a whole sweep.json, else None."""
    try:
        return read_spec(out)
    except UsageError:
        return None


def _column(values: list) -> Any:
    import pyarrow as pa

    if any(isinstance(v, dict | list) for v in values):
        return pa.array([None if v is None else json.dumps(v, sort_keys=True) for v in values],
                        pa.string())
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())


def rows_from_records(records: list[dict], param_paths: list[str]) -> list[dict]:
    rows = []
    for rec in records:
        row = {k: rec[k] for k in FIXED_COLUMNS}
        row.update({p: rec["params"].get(p) for p in param_paths})
        row.update(rec["metrics"])
        row.update({k: rec.get(k) for k in TAIL_COLUMNS})
        rows.append(row)
    return rows


def write_table(out: Path, rows: list[dict]) -> Path:
    """The Parquet table (one row per run), written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names: list[str] = []
    for r in rows:
        names += [k for k in r if k not in names]
    table = pa.table({n: _column([r.get(n) for r in rows]) for n in names}) if rows else \
        pa.table({n: pa.array([], pa.string()) for n in FIXED_COLUMNS})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    atomic_write(out / TABLE, buf.getvalue())
    return out / TABLE


MAX_TABLE_BYTES = 1 << 30


def read_table(out: Path, metrics: list[str] = ()) -> list[dict]:
    """The Parquet table's rows; a file that is not one (cut, zeroed, garbage, a FIFO),
    lacks the fixed columns, or holds a metric that is not a number is a one-line
    UsageError naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rxlab.inputs import read_bytes

    path = out / TABLE
    fix = "delete it and run `rxlab sweep FILE --out DIR --resume` to write it again"
    data = read_bytes(path, "Parquet table", MAX_TABLE_BYTES)
    try:
        # one thread, no pre-buffering: Arrow's thread pools would otherwise be alive at
        # interpreter exit, where a worker's std::thread destructor aborts the process
        # now and then ("terminate called without an active exception", exit -6, after
        # the output was written; apache/arrow#34314)
        rows = pq.read_table(pa.BufferReader(data), use_threads=False,
                             pre_buffer=False).to_pylist()
    except (pa.ArrowException, OSError, ValueError, MemoryError) as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise UsageError(f"{path}: not a readable Parquet table ({first}); {fix}") from None
    for i, r in enumerate(rows):
        why = _bad_row(r, metrics)
        if why:
            raise UsageError(f"{path}: row {i}: {why}; {fix}")
    return rows


def _bad_row(r: dict, metrics) -> str:
    if not isinstance(r.get("run_id"), str):
        return "no run_id"
    bad = [k for k in ("point", "seed", "rep") if not _count(r.get(k))]
    if bad:
        return f"{bad[0]}: {str(r.get(bad[0]))[:40]!r} is not an integer >= 0"
    bad = [m for m in metrics if not (r.get(m) is None or _number(r[m]))]
    if bad:
        return f"{bad[0]}: {str(r[bad[0]])[:40]!r} is not a number"
    return ""


def summarize(rows: list[dict], param_paths: list[str], metrics: list[str]) -> list[dict]:
    """One entry per parameter point: params, n, and (mean, ci95) per metric."""
    by_point: dict[int, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    out = []
    for point in sorted(by_point):
        rs = by_point[point]
        entry = {"point": point, "params": {p: rs[0].get(p) for p in param_paths}, "n": len(rs),
                 "stats": {}}
        for m in metrics:
            entry["stats"][m] = mean_ci([r.get(m) for r in rs])[:2]
        out.append(entry)
    return out


def write_summary(out: Path, summary: list[dict], param_paths: list[str],
                  metrics: list[str]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["point", *param_paths, "n"] + [f"{m}_{s}" for m in metrics
                                               for s in ("mean", "ci95")])
    for e in summary:
        cells = []
        for m in metrics:
            mean, ci = e["stats"][m]
            cells += ["" if math.isnan(mean) else repr(mean), "" if math.isnan(ci) else repr(ci)]
        w.writerow([e["point"], *[e["params"][p] for p in param_paths], e["n"], *cells])
    atomic_write(out / SUMMARY, buf.getvalue())
    return out / SUMMARY
