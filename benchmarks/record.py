"""The benchmark's results file: every recorded run, dated, with its tree and machine.

    .venv/bin/python benchmarks/run_bench.py --record          # appends to bench.jsonl
    .venv/bin/python benchmarks/interleave.py --record OLD NEW  # interleave.jsonl
    .venv/bin/python benchmarks/stages.py --record              # stages.jsonl
    NUMBA_CACHE_DIR=$(mktemp -d) .venv/bin/python benchmarks/compile_profile.py --record
    .venv/bin/python benchmarks/record.py [bench|interleave|stages|compile]   # the history

Each line of ``benchmarks/results/<kind>.jsonl`` is one run: ``recorded_utc``, ``tree``
(``git describe --always --dirty`` of the source tree that ran), ``machine`` (CPU model,
cores, load average, versions) and the script's own ``figures``. docs/performance.md
explains what the figures mean and how to judge a change; the dated runs live here. A
line whose ``source`` is set was transcribed from an earlier docs/performance.md, not
written by the script.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("bench", "interleave", "stages", "compile")


def tree_of(path: Path | str) -> str:
    """``git describe --always --dirty`` of the checkout holding ``path``, or 'unknown'."""
    try:
        out = subprocess.run(["git", "-C", str(path), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def record(kind: str, figures: dict, tree: str | None = None) -> Path:
    """Append one run's figures to ``results/<kind>.jsonl``; returns the file."""
    from rxlab.bench.machine import machine

    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    if tree is None:
        import rxlab

        tree = tree_of(Path(rxlab.__file__).resolve().parent)
    line = {"recorded_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "tree": tree,
            "machine": machine(), "figures": figures}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{kind}.jsonl"
    with path.open("a") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    return path


def runs(kind: str) -> list[dict]:
    path = RESULTS / f"{kind}.jsonl"
    if not path.exists():
        return []
    return [json.loads(s) for s in path.read_text().splitlines() if s.strip()]


def _num(x, unit: str = "") -> str:
    return "" if x is None else f"{x:.0f}{unit}"


def _mps(x) -> str:
    return "" if x is None else f"{x / 1e6:.2f} M"


# the columns each kind's history shows: (heading, figures -> cell)
COLUMNS = {
    "bench": (("flow-limit", lambda f: _mps(f.get("engine_pps"))),
              ("aRFS", lambda f: _mps(f.get("engine_pps_arfs"))),
              ("SimPy", lambda f: f"{f['simpy_pps'] / 1e3:.0f} K" if f.get("simpy_pps") else ""),
              ("like for like", lambda f: f"{f['ratio_vs_simpy_loop']:.1f}x"
               if f.get("ratio_vs_simpy_loop") else ""),
              ("Toeplitz / C", lambda f: f"{f['toeplitz_ratio_vs_c']:.2f}x"
               if f.get("toeplitz_ratio_vs_c") else ""),
              ("peak RSS", lambda f: _num(f.get("peak_rss_mb"), " MB"))),
    "interleave": (("old", lambda f: f.get("old_tree", "")),
                   ("loop ns per packet, min: old -> new", lambda f: ", ".join(
                       f"{sc} {v['old_min']:.1f} -> {v['new_min']:.1f}"
                       for sc, v in f.get("scenarios", {}).items()))),
    "stages": (("loop ns per packet", lambda f: ", ".join(
        f"{r['scenario']} {r.get('loop_ns', 0):.1f}" for r in f.get("rows", []))),),
    "compile": (("CPU s", lambda f: _num(f.get("simulate_cpu_s"))),
                ("peak", lambda f: _num(f.get("peak_rss_mb"), " MB")),
                ("functions", lambda f: str(f.get("functions_compiled", "")))),
}


def main(argv: list[str]) -> int:
    kinds = argv or list(KINDS)
    for kind in kinds:
        if kind not in KINDS:
            print(f"record.py: {kind!r} is not a results kind; give one of {', '.join(KINDS)}",
                  file=sys.stderr)
            return 2
    for kind in kinds:
        rows = runs(kind)
        print(f"# {kind}: {len(rows)} recorded runs ({RESULTS / (kind + '.jsonl')})")
        cols = COLUMNS[kind]
        print(" | ".join(("recorded (UTC)", "tree", "CPU", *(h for h, _ in cols))))
        for r in rows:
            f, m = r["figures"], r.get("machine", {})
            cpu = f"{m.get('cpu_model', '?')} x{m.get('cpus', '?')}"
            cells = [r["recorded_utc"], r["tree"], cpu, *(get(f) for _, get in cols)]
            print(" | ".join(cells) + (f"  [{r['source']}]" if r.get("source") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
