"""Wall time of the same sweep on one and on two workers, local processes and Dask.

    .venv/bin/python examples/sweeps/scaling.py [--repeats 5] [--no-dask]

Runs examples/sweeps/scaling.yaml (16 runs) with 1 and 2 local processes and, unless
--no-dask, on Dask clusters on 127.0.0.1 with 1 and 2 single-thread workers, started here
and stopped at the end: once with the workers in this process's session (as the local
workers are), once with each worker in a session of its own (as separately launched
`dask worker` commands are). The difference shows on a busy machine with Linux's
autogroup scheduling, which shares the CPUs between sessions, not processes.
Times the run phase (local: including forking the workers; Dask: workers already up),
interleaving the configurations, plots the median and range of --repeats, checks that
every configuration gives the same results, and writes scaling.png and scaling.json
beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent


def start_cluster(n: int, tmp: Path, own_sessions: bool) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and n single-thread workers on loopback; with own_sessions each worker
    is started in a session of its own, as separately launched `dask worker` commands are."""
    sf = tmp / f"scheduler-{n}-{own_sessions}.json"
    log = open(tmp / f"cluster-{n}-{own_sessions}.log", "w")
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                               "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sf)], stdout=log, stderr=log)]
    deadline = time.monotonic() + 60
    while True:
        try:
            address = json.loads(sf.read_text())["address"]
            break
        except (OSError, ValueError, KeyError):
            if time.monotonic() > deadline:
                raise RuntimeError("the scheduler did not start") from None
            time.sleep(0.1)
    for i in range(n):
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--name", f"w{i}",
             "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard",
             "--memory-limit", "0", "--local-directory", str(tmp)],
            stdout=log, stderr=log, start_new_session=own_sessions))
    from distributed import Client

    with Client(address, set_as_default=False) as c:
        c.wait_for_workers(n, timeout=120)
    return address, procs


def stop_cluster(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):  # workers first, one at a time
        if p.poll() is None:
            p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--sweep", default=str(HERE / "scaling.yaml"))
    args = ap.parse_args()

    import rxlab
    from rxlab.sweep import load_sweep
    from rxlab.sweep.runner import run_sweep

    rxlab.simulate("default", duration=0.001)  # compile or load the numba cache first
    load0 = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    sweep = load_sweep(args.sweep)
    tmp = Path(tempfile.mkdtemp(prefix="rxlab-scaling-"))
    times: dict[str, list[float]] = {}
    results: dict[str, dict] = {}

    configs: dict[str, dict] = {"local 1 process": {"jobs": 1},
                                "local 2 processes": {"jobs": 2}}
    clusters = []
    try:
        if not args.no_dask:
            for own, tag in ((False, "dask"), (True, "dask (own sessions)")):
                for n in (1, 2):
                    address, procs = start_cluster(n, tmp, own)
                    clusters.append(procs)
                    configs[f"{tag} {n} worker{'s' if n > 1 else ''}"] = {"scheduler": address}
        # interleaved (1, 2, 1, 2, ...) so a change in the machine's load hits all alike
        for r in range(args.repeats):
            for label, kw in configs.items():
                out = tmp / f"{label.replace(' ', '-')}-{r}"
                res = run_sweep(sweep, out, plots=False, **kw)
                times.setdefault(label, []).append(res.wall_s)
                print(f"{label}: {res.wall_s:.2f} s", flush=True)
                results[label] = {row["run_id"]: {k: v for k, v in row.items()
                                                  if k not in ("wall_s", "worker")}
                                  for row in res.rows}
    finally:
        for procs in clusters:
            stop_cluster(procs)
    first = next(iter(results.values()))
    same = all(r == first for r in results.values())
    print("identical results in every configuration:", same)

    from matplotlib.figure import Figure

    load1 = os.getloadavg()[0]
    labels = list(times)
    best = [statistics.median(times[k]) for k in labels]  # median: robust to a busy moment
    lo = [b - min(times[k]) for b, k in zip(best, labels, strict=True)]
    hi = [max(times[k]) - b for b, k in zip(best, labels, strict=True)]
    fig = Figure(figsize=(7.2, 4.0))
    ax = fig.subplots()
    colors = ["#4c72b0" if k.startswith("local") else "#55a868" if "session" in k
              else "#dd8452" for k in labels]
    bars = ax.barh(labels, best, color=colors, xerr=[lo, hi], capsize=3,
                   error_kw={"elinewidth": 1, "ecolor": "#444"})
    for b, v, k in zip(bars, best, labels, strict=True):
        one = k.replace("2 processes", "1 process").replace("2 workers", "1 worker")
        base = best[labels.index(one)]
        ax.text(v + hi[labels.index(k)], b.get_y() + b.get_height() / 2,
                f"  {v:.1f} s (x{base / v:.2f})",
                va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(f"wall time of the run phase, s (median and range of {args.repeats}); "
                  f"load average {load0:.1f} -> {load1:.1f}")
    ax.set_title(f"sweep '{sweep.name}': {len(sweep.runs)} runs, one vs two workers "
                 f"({os.cpu_count()} CPUs)", fontsize="medium")
    ax.set_xlim(0, max(max(t) for t in times.values()) * 1.35)
    fig.savefig(HERE / "scaling.png", dpi=100, bbox_inches="tight")
    (HERE / "scaling.json").write_text(json.dumps(
        {"sweep": sweep.name, "runs": len(sweep.runs), "cpus": os.cpu_count(),
         "seconds": times, "median": dict(zip(labels, best, strict=True)),
         "identical_results": same,
         "load_average_1min": [round(load0, 2), round(load1, 2)]}, indent=1) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {HERE / 'scaling.png'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
