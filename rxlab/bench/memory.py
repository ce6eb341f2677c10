"""Peak resident memory of a run, measured in a fresh child process.

``python -m rxlab.bench.memory --packets N`` runs the flow-limit scenario lengthened to
about N offered packets and prints one JSON line: peak RSS (``VmHWM``) after import,
after a short warm-up run (numba cache load) and after the measured run, plus the wall
time and the packets actually simulated. A child process is needed because the peak
is a high-water mark of the whole process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _maxrss_mb() -> float:
    """Peak RSS of this process: VmHWM of /proc/self/status, else ru_maxrss.

    VmHWM is the high-water mark of the current address space, which exec starts
    afresh. ru_maxrss is not enough in a child: Linux folds the RSS of the address space
    that exec replaced (a fork of the parent) into it, so a child of a large parent
    reports the parent's size.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:  # pragma: no cover - not Linux
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _ru_maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_now_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:  # pragma: no cover - not Linux
        return float("nan")


def measure(packets: float, interval: float | None = None, scenario: str = "flow-limit") -> dict:
    after_import = _maxrss_mb()
    from rxlab.bench import scenarios
    from rxlab.scenario import with_overrides
    from rxlab.simulate import simulate

    pick = scenarios.flow_limit if scenario == "flow-limit" else scenarios.arfs_flow_match
    warm = pick(True)
    if warm is None:
        raise SystemExit(f"no {scenario} scenario")
    simulate(warm)
    after_warmup = _maxrss_mb()
    duration = packets / scenarios.packets_per_second(warm)
    sc = with_overrides(warm, {"duration": duration})
    if interval:
        sc = with_overrides(sc, {"metrics.interval": interval})
    t0 = time.perf_counter()
    res = simulate(sc)
    wall = time.perf_counter() - t0
    return {
        "scenario": scenario,
        "packets_target": packets,
        "offered": res.data["packets"]["offered"],
        "duration_s": round(duration, 3),
        "series_interval_s": sc.metrics.interval,
        "series_intervals": len(res.series.get("t_s", [])),
        "wall_s": round(wall, 3),
        "pps": round(res.data["packets"]["offered"] / wall, 1),
        "rss_after_import_mb": round(after_import, 1),
        "rss_after_warmup_mb": round(after_warmup, 1),
        "peak_rss_mb": round(_maxrss_mb(), 1),
        "ru_maxrss_mb": round(_ru_maxrss_mb(), 1),
        "rss_at_end_mb": round(_rss_now_mb(), 1),
    }


def measure_in_child(packets: float, interval: float | None = None,
                     scenario: str = "flow-limit", timeout: float | None = None) -> dict:
    """Run ``measure`` in a fresh interpreter and return its JSON result."""
    cmd = [sys.executable, "-m", "rxlab.bench.memory", "--packets", str(packets),
           "--scenario", scenario]
    if interval:
        cmd += ["--interval", str(interval)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=float, required=True)
    ap.add_argument("--interval", type=float, help="series interval (s); default: scenario's")
    ap.add_argument("--scenario", default="flow-limit", choices=["flow-limit", "arfs-flow-match"])
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.packets, a.interval, a.scenario)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
