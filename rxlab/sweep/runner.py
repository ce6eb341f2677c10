"""Run a sweep's runs on local processes or on a Dask cluster, each result written once.

Workers get the full scenario of their run as a mapping (no files needed on their side)
and return the run's ``Result.data``; the driver (this process) writes every result as
it arrives, atomically, keyed by run id, holding the output folder's lock throughout. A
local worker process that dies breaks the pool: the pool is rebuilt and the unfinished
runs are submitted again. On Dask the scheduler reschedules the tasks of a worker that
died (tasks are keyed by run id).

Local processes never outlive the driver: the forkserver and the workers ask the kernel
for SIGKILL when their parent dies (``die_with_parent``), so a driver killed outright
takes the forkserver with it and the forkserver its workers; the resource tracker then
reads EOF on its pipe and exits. SIGTERM is turned into ``Terminated`` by the CLI, which
stops the pool like Ctrl-C does.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.sweep import store
from rxlab.sweep.metrics import key_metrics
from rxlab.sweep.spec import Run, Sweep

MAX_POOL_BREAKS = 3  # consecutive pool breaks without progress before giving up
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
DRIVER_ENV = "RXLAB_SWEEP_DRIVER"  # the driver's pid, for the forkserver (see _preload)


class Terminated(BaseException):
    """SIGTERM reached the driver (see ``sigterm_raises``); like KeyboardInterrupt, not an
    Exception, so no ``except Exception`` on the way mistakes it for a failed run."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` in the main thread: the pool is
    stopped, the lock released and the finished runs kept, as with Ctrl-C."""
    def raise_terminated(signum, frame):
        raise Terminated

    old = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (prctl PR_SET_PDEATHSIG).

    The kernel sends it when the *thread* that forked this process exits: the driver's
    main thread starts the forkserver (``_start_forkserver``), and the forkserver forks
    from its main thread. A parent gone before this call sends nothing: callers compare
    ``os.getppid()`` with the parent they expect afterwards. Elsewhere this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):  # no libc prctl: the workers just lack the guard
        pass


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


def _init_local_worker(parent: int | None) -> None:
    # Ctrl-C goes to the whole process group: let the driver decide what to do
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if parent is not None and os.getppid() != parent:
        os._exit(1)  # the parent died before the line above: no signal will come


# ---------------------------------------------------------------- backends
class RunError(Exception):
    """A run raised: which one, and what."""

    def __init__(self, run_id: str, error: BaseException):
        super().__init__(f"run {run_id}: {error}")
        self.run_id, self.error = run_id, error


Task = dict
OnResult = Callable[[dict], None]


def run_local(tasks: list[Task], jobs: int, on_result: OnResult) -> int:
    """Run tasks on ``jobs`` local processes; returns how many times the pool broke."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from rxlab._cache import announce_compile

    announce_compile()  # the workers compile the loop; this process says so once
    pending = {t["run_id"]: t for t in tasks}
    breaks = fruitless = 0
    ctx = _context(mp)
    while pending:
        parent = _start_forkserver(ctx)
        workers = max(1, min(jobs, len(pending)))
        ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                 initializer=_init_local_worker, initargs=(parent,))
        broken = False
        try:
            try:
                feed = _Feed(ex, list(pending.items()), IN_FLIGHT_PER_WORKER * workers)
                while feed.running:
                    f, rid = feed.next_done()
                    try:
                        out = f.result()
                    except BrokenProcessPool:
                        broken = True  # every future of the pool ends so: resubmit the rest
                        break
                    except Exception as e:
                        raise RunError(rid, e) from e
                    on_result(out)
                    pending.pop(rid, None)
                    fruitless = 0
                    feed.top_up()
            except BrokenProcessPool:
                # a worker died after the last result was taken: submit finds the pool
                # broken before any future says so (seen under load), same as above
                broken = True
        except BaseException:
            _kill_pool(ex)
            raise
        if broken:
            breaks += 1
            fruitless += 1
            _kill_pool(ex)
            if fruitless >= MAX_POOL_BREAKS:
                raise RuntimeError(f"local worker processes died {fruitless} times in a row "
                                   f"with {len(pending)} runs left; giving up")
        else:
            ex.shutdown(wait=True)
    return breaks


IN_FLIGHT_PER_WORKER = 2  # runs queued per worker: it never waits, the driver never hoards


class _Feed:
    """The runs on a pool, a few per worker at a time, their completions on a queue.

    A sweep of 100,000 runs once submitted them all and waited with
    ``concurrent.futures.wait``, which takes every future's lock on each call: Ctrl-C
    inside it left locks held, and the shutdown waited on them for good. Here the pool
    holds a few futures, each reports itself through ``add_done_callback``, and the
    driver waits on a queue, where Ctrl-C and SIGTERM leave no lock behind.
    """

    def __init__(self, ex, items: list, limit: int):
        import queue

        self.ex, self.items, self.limit = ex, iter(items), limit
        self.done = queue.SimpleQueue()
        self.futs: dict = {}  # future -> run id, while on the pool
        self.top_up()

    @property
    def running(self) -> bool:
        return bool(self.futs)

    def top_up(self) -> None:
        # the pool forks its workers inside submit: stops wait for the batch (_stops_held)
        with _stops_held():
            while len(self.futs) < self.limit:
                item = next(self.items, None)
                if item is None:
                    return
                f = self.ex.submit(execute_run, item[1])
                self.futs[f] = item[0]
                f.add_done_callback(self.done.put)

    def next_done(self):
        """(future, run id) of the next run to finish; a signal interrupts the wait."""
        import queue

        while True:
            try:
                f = self.done.get(timeout=0.5)
            except queue.Empty:
                continue
            return f, self.futs.pop(f)


def _context(mp):
    """Workers fork from a forkserver that has the jitted loop loaded (see ``_preload``);
    never a plain fork of this process, which runs threads (progress bar, pool manager)."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["rxlab.sweep._preload"])
        os.environ[DRIVER_ENV] = str(os.getpid())  # the forkserver checks its parent
        return ctx
    return mp.get_context("spawn")


def _noop() -> None:
    pass


def _start_forkserver(ctx) -> int | None:
    """Start the forkserver (again, if it died) and wait for its warm-up (a minute or
    more with a cold numba cache) here, where Ctrl-C and SIGTERM act at once: the pool
    is fed under ``_stops_held``. Returns the pid the workers will have as parent."""
    if ctx.get_start_method() != "forkserver":
        return os.getpid()
    from multiprocessing import forkserver

    p = ctx.Process(target=_noop)
    p.start()
    p.join()
    return getattr(forkserver._forkserver, "_forkserver_pid", None)  # no public name


@contextmanager
def _stops_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block ends, then act on them. The pool forks its
    workers inside ``submit``; a stop raised there would leave a worker the pool does not
    list yet, to fail on the queues the exiting driver removes (a traceback on the
    terminal). A signal mask would not do: any thread (numpy's BLAS threads, say) can
    take the signal, and CPython then runs the handler in the main thread regardless."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be set from the main thread, which alone runs them
        return
    caught: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: caught.append(signum))
           for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if caught:
            handler = old[caught[0]]
            if callable(handler):
                handler(caught[0], None)  # raises KeyboardInterrupt or Terminated
            elif handler == signal.SIG_DFL:
                signal.raise_signal(caught[0])


def _kill_pool(ex) -> None:
    # workers first: shutting the pool down frees its queues' semaphores, and a worker
    # still starting would then fail on them with a traceback on the terminal
    procs = list(getattr(ex, "_processes", {}).values())  # no public way to stop workers
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
    # wait for the pool's manager thread: left running, it races the interpreter's exit
    # hook, which then writes to a pipe the thread has closed (CPython 3.11: a traceback)
    ex.shutdown(wait=True, cancel_futures=True)


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
                breaks = run_local(tasks, jobs or os.cpu_count() or 1, on_result)
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

