"""Run a sweep's runs on local processes (``rxlab.parallel``) or on a Dask cluster, each
result written once.

Workers get the full scenario of their run as a mapping (no files needed on their side)
and return the run's ``Result.data``; the driver (this process) writes every result as
it arrives, atomically, keyed by run id, holding the output folder's lock throughout. On
Dask the scheduler reschedules the tasks of a worker that died (tasks are keyed by run
id).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.parallel import RunError, Terminated, run_local
from rxlab.sweep import store
from rxlab.sweep.metrics import key_metrics
from rxlab.sweep.spec import Run, Sweep


# ---------------------------------------------------------------- worker side
def execute_run(task: dict) -> dict:
    """Simulate one run (in a worker process or on a Dask worker)."""
    from rxlab.scenario import Scenario
    from rxlab.simulate import simulate

    t0 = time.perf_counter()
    sc = Scenario.model_validate(task["scenario"])
    res = simulate(sc)
    return {"run_id": task["run_id"], "data": res.data,
            "wall_s": round(time.perf_counter() - t0, 6), "worker": _worker_name()}


def _worker_name() -> str:
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker

            return get_worker().address
        except (ImportError, ValueError):
            pass
    return f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------- backends
Task = dict
OnResult = Callable[[dict], None]


def connect(scheduler: str):
    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
    _probe(scheduler)
    try:
        return Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--scheduler {scheduler}: cannot reach a Dask scheduler "
                         f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e})"
                         ) from None


def _probe(scheduler: str) -> None:
    """Fail fast (one line) when nothing listens at a tcp:// address."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(scheduler)
        host, port = parse_host_port(loc)
    except (ValueError, TypeError):
        raise UsageError(f"--scheduler {scheduler!r}: not an address like "
                         "tcp://HOST:PORT") from None
    if scheme != "tcp":
        return
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as e:
        raise UsageError(f"--scheduler {scheduler}: cannot reach a Dask scheduler "
                         f"({e.strerror or e})") from None


def run_dask(tasks: list[Task], client, on_result: OnResult) -> None:
    """Run tasks on an existing Dask cluster; results come back here to be written.

    Nothing runs locally but this client: if the driver dies, the scheduler drops the
    client's tasks once it notices the lost connection; a task already running on a
    worker runs to its end there (a remote worker is not ours to kill).
    """
    from distributed import as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    futs = []
    try:
        futs = [client.submit(execute_run, t, key=f"rxlab-run-{t['run_id']}", pure=False)
                for t in tasks]
        for fut in as_completed(futs, loop=client.loop):
            try:
                out = fut.result()
            except KilledWorker as e:
                raise RuntimeError(f"run {fut.key} killed every worker that ran it ({e})"
                                   ) from None
            except FutureCancelledError:
                raise RuntimeError(f"run {fut.key} was cancelled on the cluster") from None
            except ImportError as e:
                raise UsageError(f"the Dask workers cannot run rxlab ({e}); install rxlab "
                                 "where the workers run") from None
            except Exception as e:
                raise RunError(str(fut.key).removeprefix("rxlab-run-"), e) from e
            on_result(out)
            fut.release()
    finally:
        pending = [f for f in futs if not f.done()]
        if pending:
            client.cancel(pending)


# ---------------------------------------------------------------- the sweep
@dataclass
class Outcome:
    total: int
    skipped: int
    ran: int
    wall_s: float
    rows: list[dict]
    summary: list[dict]
    plots: list[Path]
    pool_breaks: int = 0
    plots_skipped: list[str] = field(default_factory=list)  # not plotted, and why


def _record(sweep: Sweep, run: Run, out: dict) -> dict:
    from rxlab import __version__

    return {
        "run_id": run.run_id, "point": run.point, "params": run.params, "seed": run.seed,
        "rep": run.rep, "sweep": sweep.name,
        "metrics": key_metrics(out["data"], sweep.metrics), "result": out["data"],
        "wall_s": out["wall_s"], "worker": out["worker"], "rxlab_version": __version__,
    }


def run_sweep(sweep: Sweep, out: str | Path, *, jobs: int | None = None,
              scheduler: str | None = None, resume: bool = False, replace: bool = False,
              console=None, show_progress: bool = True, plots: bool = True) -> Outcome:
    """Run every unfinished run of ``sweep`` into ``out``; then the table, summary, plots.

    ``out`` is locked for the whole call: a second sweep on it is a UsageError. A folder
    that holds results needs ``resume`` (keep the finished runs of the same ids) or
    ``replace`` (delete the previous sweep's files first).
    """
    out = Path(out)
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: give a number of processes >= 1")
    if scheduler and jobs is not None:
        raise UsageError("--jobs sets local processes; with --scheduler the cluster's "
                         "workers run the sweep (drop one of the two)")
    if resume and replace:
        raise UsageError("--resume keeps the finished runs and --replace deletes them; "
                         "give one of the two")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    client = connect(scheduler) if scheduler else None  # before anything is written
    try:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--out {out}: cannot create the folder ({e.strerror})") from None
        with store.lock(out):
            _claim(sweep, out, resume, replace)
            return _run_locked(sweep, out, jobs, scheduler, client, resume, console,
                               show_progress, plots)
    finally:
        if client is not None:
            client.close()


def _claim(sweep: Sweep, out: Path, resume: bool, replace: bool) -> None:
    """Check what ``out`` holds against ``sweep`` (lock held); remove what would mix two
    sweeps' files: a table or plots stay only beside the sweep.json they came from."""
    ids = [r.run_id for r in sweep.runs]
    prev = store.recorded(out)
    prev_ids = [r["run_id"] for r in prev["runs"]] if prev else None
    if replace:
        store.remove_sweep(out)
        return
    if store.has_results(out) and not resume:
        if prev_ids == ids:
            raise UsageError(f"--out {out} already holds results of this sweep; add --resume "
                             "to finish it, --replace to run it again, or choose another --out")
        if prev:
            k = len(store.finished(out, prev_ids))
            what = f"another sweep ({prev.get('name', '?')}: {k} of {len(prev_ids)} runs)"
        else:
            what = f"sweep results but no readable {store.SPEC}"
        raise UsageError(f"--out {out} holds {what}; choose another --out, or add --replace "
                         "to delete them (--resume would keep the runs the sweeps share)")
    if prev_ids != ids:
        store.remove_derived(out)


def _run_locked(sweep: Sweep, out: Path, jobs: int | None, scheduler: str | None, client,
                resume: bool, console, show_progress: bool, plots: bool) -> Outcome:
    store.clean_temp(out)
    store.write_spec(out, sweep.to_json())

    ids = [r.run_id for r in sweep.runs]
    done = store.finished(out, ids) if resume else set()
    todo = [r for r in sweep.runs if r.run_id not in done]
    by_id = {r.run_id: r for r in sweep.runs}
    written: set[str] = set(done)
    t0 = time.perf_counter()

    bar = _progress(console, show_progress, sweep, len(ids), len(done), scheduler, jobs)

    def on_result(res: dict) -> None:
        rid = res["run_id"]
        if rid in written:  # a retried run reported twice: its result is already there
            return
        store.write_run(out, _record(sweep, by_id[rid], res))
        written.add(rid)
        bar.advance()

    tasks = [{"run_id": r.run_id, "scenario": sweep.scenario_for(r)} for r in todo]
    breaks = 0
    try:
        with bar:
            if tasks and client is not None:
                run_dask(tasks, client, on_result)
            elif tasks:
                breaks = run_local(execute_run, [(t["run_id"], t) for t in tasks],
                                   jobs or os.cpu_count() or 1, lambda rid, out: on_result(out))
    except (KeyboardInterrupt, Terminated) as e:  # the CLI prints the note as one line
        e.add_note(f"{len(written)} of {len(ids)} runs finished in {out}; run the same "
                   "command with --resume to finish the rest")
        raise
    except RunError as e:
        run = by_id[e.run_id]
        desc = ", ".join(f"{k}={v!r}" for k, v in run.params.items()) or "base scenario"
        what = f"run {run.run_id} ({desc}, seed {run.seed})"
        if isinstance(e.error, UsageError):
            raise UsageError(f"{sweep.source}: {what} failed: {e.error}; the finished runs "
                             "are kept (fix the sweep, then --resume)") from None
        e.error.add_note(f"in sweep {sweep.source}, {what}")
        raise e.error from None
    wall = time.perf_counter() - t0

    records = [store.read_run(out, rid) for rid in ids]
    missing = [rid for rid, rec in zip(ids, records, strict=True) if rec is None]
    if missing:
        raise RuntimeError(f"{len(missing)} runs have no result after the sweep: {missing[:5]}")
    rows = store.rows_from_records(records, sweep.param_paths)
    store.write_table(out, rows)
    summary = store.summarize(rows, sweep.param_paths, sweep.metrics)
    store.write_summary(out, summary, sweep.param_paths, sweep.metrics)
    paths: list[Path] = []
    not_plotted: list[str] = []
    if plots:
        from rxlab.sweep.plots import write_plots

        paths = write_plots(out, rows, sweep.param_paths, sweep.metrics, not_plotted)
    return Outcome(total=len(ids), skipped=len(done), ran=len(todo), wall_s=wall, rows=rows,
                   summary=summary, plots=paths, pool_breaks=breaks,
                   plots_skipped=not_plotted)


class _Bar:
    """A rich progress bar over runs (or nothing when there is no console)."""

    def __init__(self, console, show: bool, total: int, completed: int, label: str):
        self.progress = None
        if console is None or not show:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("runs"),
                                 TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=console, transient=False)
        self.task = self.progress.add_task(label, total=total, completed=completed)

    def __enter__(self):
        if self.progress:
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.progress:
            self.progress.stop()

    def advance(self) -> None:
        if self.progress:
            self.progress.advance(self.task)


def _progress(console, show: bool, sweep: Sweep, total: int, completed: int,
              scheduler: str | None, jobs: int | None) -> _Bar:
    from rxlab.report.printable import for_rich  # the name is the user's: no raw ESC

    where = f"dask {scheduler}" if scheduler else f"{jobs or os.cpu_count() or 1} processes"
    return _Bar(console, show, total, completed, f"{for_rich(sweep.name)} ({where})")

