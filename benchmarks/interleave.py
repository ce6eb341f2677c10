"""Event-loop speed of two source trees, timed alternately (old, new, old, new, ...).

    .venv/bin/python benchmarks/interleave.py OLD_TREE NEW_TREE [--rounds 3] [arfs ...]

Each round runs ``benchmarks/stages.py --runs 1`` once per tree, in a fresh process
with that tree first on PYTHONPATH (each tree keeps its own compiled loop in numba's
cache, so compile both first). Machine speed drifts by more than the changes being
judged; alternating spreads the drift over both sides. Prints each tree's event-loop ns
per packet per scenario (min and all rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def one(tree: Path, which: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "rows.json"
        env = dict(os.environ, PYTHONPATH=str(tree))
        subprocess.run([sys.executable, str(tree / "benchmarks" / "stages.py"), *which,
                        "--runs", "1", "--json", str(out)], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        rows = json.loads(out.read_text())["rows"]
    return {r["scenario"]: r["loop_ns"] for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("which", nargs="*", default=["flow-limit", "reference", "arfs"])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    got: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for _ in range(a.rounds):
        for side, tree in (("old", a.old), ("new", a.new)):
            for sc, ns in one(tree.resolve(), a.which).items():
                got[side].setdefault(sc, []).append(round(ns, 1))
    for sc in got["old"]:
        o, n = got["old"][sc], got["new"].get(sc, [])
        print(f"{sc:12s} old min {min(o):7.1f} {o}   new min {min(n):7.1f} {n}")


if __name__ == "__main__":
    main()
