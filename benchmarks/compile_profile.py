"""Where the first (cold) compile of the event loop spends its time.

    NUMBA_CACHE_DIR=$(mktemp -d) /usr/bin/time -v \
        .venv/bin/python benchmarks/compile_profile.py [--record]

Runs ``rxlab.simulate('default', duration=0.001)`` with numba's event hooks
(``numba.core.event``) installed and prints, in CPU seconds of this process: the
functions compiled (count and the most expensive, exclusive of the functions they
trigger), the compiler passes summed over all functions (type inference, lowering, ...)
and the time spent holding LLVM's lock (optimisation and code generation). An empty
NUMBA_CACHE_DIR makes it a cold compile; ``rxlab._cache.configure`` appends its key.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections import defaultdict

# isort: off
import rxlab  # first: it points NUMBA_CACHE_DIR at its keyed folder before numba loads
import numba.core.event as ev
# isort: on


class Recorder(ev.Listener):
    """Exclusive CPU time per compiled function, per pass name and under the LLVM lock."""

    def __init__(self):
        self.stack = []  # [kind, key, t0, child time]
        self.by_kind = defaultdict(float)
        self.by_func = defaultdict(float)
        self.by_pass = defaultdict(float)
        self.compiles = 0
        self.n_by_func = defaultdict(int)  # compilations of each function (one per signature)

    def on_start(self, event):
        data = event.data or {}
        if event.kind == "numba:compile":
            disp = data.get("dispatcher")
            key = getattr(getattr(disp, "py_func", None), "__qualname__", str(disp))
            mod = getattr(getattr(disp, "py_func", None), "__module__", "")
            key = f"{mod}.{key}"
        elif event.kind == "numba:run_pass":
            key = data.get("name", "?").split(" [")[0]
        else:
            key = event.kind
        self.stack.append([event.kind, key, time.process_time(), 0.0])

    def on_end(self, event):
        kind, key, t0, child = self.stack.pop()
        total = time.process_time() - t0
        excl = total - child
        if self.stack:
            self.stack[-1][3] += total
        self.by_kind[kind] += excl
        if kind == "numba:compile":
            self.compiles += 1
            self.n_by_func[key] += 1
        if kind == "numba:run_pass":
            self.by_pass[key] += excl
        # attribute exclusive time to the innermost function being compiled
        for frame in reversed(self.stack):
            if frame[0] == "numba:compile":
                self.by_func[frame[1]] += excl
                break
        else:
            if kind == "numba:compile":
                self.by_func[key] += excl


def time_llvm_steps() -> dict:
    """Wrap numba's LLVM steps (function passes, the module passes run once a library has
    linked in its callees, machine-code generation) to sum their CPU time."""
    from numba.core import codegen

    spent = defaultdict(float)
    lib = codegen.JITCodeLibrary
    steps = {"function_passes": "_optimize_functions", "module_passes": "_optimize_final_module",
             "machine_code": "_finalize_specific"}
    for label, name in steps.items():
        orig = getattr(lib, name)

        def wrapped(self, *a, _orig=orig, _label=label, **kw):
            t0 = time.process_time()
            try:
                return _orig(self, *a, **kw)
            finally:
                spent[_label] += time.process_time() - t0
        setattr(lib, name, wrapped)
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--record", action="store_true",
                    help="append the figures to benchmarks/results/compile.jsonl")
    args = ap.parse_args()

    llvm = time_llvm_steps()
    rec = Recorder()
    for kind in ("numba:compile", "numba:run_pass", "numba:llvm_lock"):
        ev.register(kind, rec)
    t0, c0 = time.perf_counter(), time.process_time()
    rxlab.simulate(args.scenario, duration=0.001)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "file": rxlab.__file__,
        "simulate_wall_s": round(wall, 1),
        "simulate_cpu_s": round(cpu, 1),
        "peak_rss_mb": round(ru.ru_maxrss / 1024),
        "functions_compiled": rec.compiles,
        "by_kind_s": {k: round(v, 1) for k, v in rec.by_kind.items()},
        "llvm_steps_s": {k: round(v, 1) for k, v in llvm.items()},
        "by_pass_s": {k: round(v, 1) for k, v in
                      sorted(rec.by_pass.items(), key=lambda kv: -kv[1]) if v >= 0.05},
        "top_functions_s": {k: round(v, 1) for k, v in
                            sorted(rec.by_func.items(), key=lambda kv: -kv[1])[:args.top]},
    }
    out["compiled_more_than_once"] = {k: n for k, n in sorted(rec.n_by_func.items(),
                                                                key=lambda kv: -kv[1]) if n > 1}
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.record:
        from record import record

        print(f"# recorded in {record('compile', out)}")


if __name__ == "__main__":
    main()
