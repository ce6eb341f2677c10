"""The one process pool of every command: ``run --seeds``, ``compare``, ``reproduce``,
``tune`` and ``sweep`` run their simulations through ``run_local`` (a sweep may use a
Dask cluster instead: ``rxlab.sweep.runner.run_dask``).

Workers fork from a forkserver that has loaded (or compiled) the jitted loop once
(``rxlab._preload``), so N workers never compile it N times. A worker process that
dies breaks the pool: the pool is rebuilt and the unfinished tasks are submitted again.
Local processes never outlive the driver: the forkserver and the workers ask the kernel
for SIGKILL when their parent dies (``die_with_parent``), so a driver killed outright
takes the forkserver with it and the forkserver its workers; the resource tracker then
reads EOF on its pipe and exits. SIGTERM is turned into ``Terminated`` by the CLI
(``sigterm_raises``), which stops the pool like Ctrl-C does.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


def _init_local_worker(parent: int | None) -> None:
    # Ctrl-C goes to the whole process group: let the driver decide what to do
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if parent is not None and os.getppid() != parent:
        os._exit(1)  # the parent died before the line above: no signal will come


class RunError(Exception):
    """A run raised: which one, and what."""

    def __init__(self, run_id: str, error: BaseException):
        super().__init__(f"run {run_id}: {error}")
        self.run_id, self.error = run_id, error


def run_local(fn: Callable[[Any], Any], tasks: list[tuple[str, Any]], jobs: int,
              on_result: Callable[[str, Any], None]) -> int:
    """``fn(arg)`` for every ``(task id, arg)`` of ``tasks`` on ``jobs`` local processes,
    ``on_result(task id, result)`` in this process as each finishes (in any order).
    ``fn`` and ``arg`` must pickle (a module-level function). A task that raises stops
    the rest: ``RunError`` names it. Returns how many times the pool broke."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from rxlab._cache import announce_compile

    announce_compile()  # the workers compile the loop; this process says so once
    pending = dict(tasks)
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
                feed = _Feed(ex, fn, list(pending.items()), IN_FLIGHT_PER_WORKER * workers)
                while feed.running:
                    f, rid = feed.next_done()
                    try:
                        out = f.result()
                    except BrokenProcessPool:
                        broken = True  # every future of the pool ends so: resubmit the rest
                        break
                    except Exception as e:
                        raise RunError(rid, e) from e
                    on_result(rid, out)
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


def run_each(fn: Callable[[Any], Any], tasks: list[tuple[str, Any]], jobs: int,
             on_result: Callable[[str, Any], None]) -> None:
    """``run_local``, with a task's error raised as the task raised it (a UsageError stays
    a one-line error), for callers that have nothing to add to it."""
    try:
        run_local(fn, tasks, jobs, on_result)
    except RunError as e:
        raise e.error from None


IN_FLIGHT_PER_WORKER = 2  # runs queued per worker: it never waits, the driver never hoards


class _Feed:
    """The runs on a pool, a few per worker at a time, their completions on a queue.

    A sweep of 100,000 runs once submitted them all and waited with
    ``concurrent.futures.wait``, which takes every future's lock on each call: Ctrl-C
    inside it left locks held, and the shutdown waited on them for good. Here the pool
    holds a few futures, each reports itself through ``add_done_callback``, and the
    driver waits on a queue, where Ctrl-C and SIGTERM leave no lock behind.
    """

    def __init__(self, ex, fn, items: list, limit: int):
        import queue

        self.ex, self.fn, self.items, self.limit = ex, fn, iter(items), limit
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
                f = self.ex.submit(self.fn, item[1])
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
        ctx.set_forkserver_preload(["rxlab._preload"])
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
