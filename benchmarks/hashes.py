"""A sha256 of every result: built-in scenarios, reproduction cases, benchmark scenarios.

    .venv/bin/python benchmarks/hashes.py > before.txt    # on the old code
    .venv/bin/python benchmarks/hashes.py > after.txt     # on the new code
    diff before.txt after.txt                             # empty: bit-identical

``--without tasks,config.threaded,queues[].irqs`` leaves out result keys the newer version
added (``name[]``: in every item of a list), so that two versions' numbers compare where
the output grew.

One line per run, ``<sha256 of the result's JSON>  <label>``. Reproduction cases run in
quick mode; a case with its own runner (not ``simulate``) hashes its metrics. The
benchmark's scenarios run shortened (``--bench-duration``), since only identity matters.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


WITHOUT: list[str] = []  # dotted keys left out of every result (--without)


def _drop(d, path: list[str]) -> None:
    """Remove the key ``path`` names; ``name[]`` is every item of the list ``name``."""
    head, rest = path[0], path[1:]
    if not isinstance(d, dict):
        return
    if not rest:
        d.pop(head, None)
    elif head.endswith("[]"):
        for item in d.get(head[:-2], []):
            _drop(item, rest)
    else:
        _drop(d.get(head, {}), rest)


def result_text(res) -> str:
    """The result's JSON and its per-interval series (numbers in full)."""
    import numpy as np

    for key in WITHOUT:
        _drop(res.data, key.split("."))
    series = {k: np.asarray(v).tolist() for k, v in sorted(res.series.items())}
    return res.to_json() + json.dumps(series, sort_keys=True)


def runs(bench_duration: float):
    """(label, thunk returning the JSON text to hash), in a fixed order."""
    import rxlab
    from rxlab.bench import scenarios as bench
    from rxlab.repro import EXPERIMENTS

    for path in sorted((Path(rxlab.__file__).parent / "scenarios").glob("*.yaml")):
        yield f"scenario/{path.stem}", lambda name=path.stem: result_text(rxlab.simulate(name))
    for name in sorted(EXPERIMENTS):
        mod = EXPERIMENTS[name]
        for case, params, spec in mod.cases(True, None):
            if hasattr(mod, "run_case"):
                def thunk(mod=mod, case=case, params=params, spec=spec):
                    return json.dumps(mod.run_case(case, params, spec), sort_keys=True)
            else:
                def thunk(sc=spec):
                    return result_text(rxlab.simulate(sc))
            yield f"repro/{name}/{case}", thunk
    yield "bench/reference", lambda: result_text(rxlab.simulate(bench.reference(bench_duration)))
    yield "bench/flow-limit", lambda: result_text(rxlab.simulate(
        bench.flow_limit(False, bench_duration)))
    arfs = bench.arfs_flow_match(False, bench_duration)
    if arfs is not None:
        yield "bench/arfs-flow-match", lambda: result_text(rxlab.simulate(arfs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-duration", type=float, default=0.05,
                    help="simulated seconds of each benchmark scenario (default 0.05)")
    ap.add_argument("-k", help="only labels containing this text")
    ap.add_argument("--without", default="",
                    help="comma-separated dotted result keys to leave out (e.g. keys a newer "
                         "version adds: --without tasks,config.threaded), on both sides")
    args = ap.parse_args()
    WITHOUT.extend(k for k in args.without.split(",") if k)
    t0 = time.perf_counter()
    n = 0
    for label, thunk in runs(args.bench_duration):
        if args.k and args.k not in label:
            continue
        print(f"{_sha(thunk())}  {label}", flush=True)
        n += 1
    print(f"{n} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
