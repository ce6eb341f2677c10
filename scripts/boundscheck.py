#!/usr/bin/env python3
"""Run a sample of scenarios with numba's bounds checking on (``NUMBA_BOUNDSCHECK=1``).

The compiled loop indexes its arrays without checks; an index the validation let through
would read or write out of range silently. Here every jitted function is compiled with
bounds checks, so such an index raises ``IndexError`` instead, and the run fails. The
sample: the built-in scenarios, two richer scenarios that use most sections (RPS, RFS,
aRFS, flow limit, n-tuple rules, RSS contexts, migration, cost jitter, XDP, AF_XDP), the
hostile command lines that are accepted (``tests/hostile_cases.py``), and two
``rxlab reproduce --quick`` experiments. Each result must equal the unchecked run's.

The bounds-checked code goes to its own numba cache (a temporary folder, removed at the
end unless --keep), never to the normal one. Compiling it takes minutes and ~2.5 GB.

    .venv/bin/python scripts/boundscheck.py [--cache DIR] [--keep] [--quick]

Exit status 0 when every run held; 1 otherwise (each failure printed).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import hostile_cases as H  # noqa: E402

RUN_TIMEOUT = 600.0
CANARY = """
import numpy as np
from numba import njit
@njit(_nrt=False)
def f(a, i):
    return a[i]
try:
    f(np.zeros(4), 9)
except IndexError:
    print("checked")
else:
    print("unchecked")
"""


def sample(quick: bool) -> list[H.Case]:
    from test_fuzz_cli import base_scenarios

    out = []
    for name in sorted(p.stem for p in (ROOT / "rxlab" / "scenarios").glob("*.yaml")):
        out.append(H.Case(f"builtin-{name}", f"built-in scenario {name}",
                          ("run", name, "--json"), "ok", "builtin"))
    for name, data in base_scenarios().items():
        if name in ("rich", "xdp"):
            out.append(H.Case(f"fuzz-base-{name}", f"the fuzz's {name} scenario",
                              ("run", "s.yaml", "--json"), "ok", "rich",
                              {"s.yaml": yaml.safe_dump(data, sort_keys=False)}))
    if not quick:
        out += [c for c in H.CASES if c.expect in ("ok", "either") and c.argv[0] == "run"]
        for exp in ("flow-limit", "cpumap"):
            out.append(H.Case(f"reproduce-{exp}", f"rxlab reproduce {exp} --quick",
                              ("reproduce", exp, "--quick", "--json"), "ok", "reproduce"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="numba cache folder for the bounds-checked code")
    ap.add_argument("--keep", action="store_true", help="keep the cache folder")
    ap.add_argument("--quick", action="store_true", help="built-in and rich scenarios only")
    args = ap.parse_args()
    cache = Path(args.cache or tempfile.mkdtemp(prefix="rxlab-boundscheck-"))
    checked = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(cache)}
    plain = {k: v for k, v in os.environ.items() if k != "NUMBA_BOUNDSCHECK"}
    t_start = time.monotonic()
    try:
        canary = subprocess.run([sys.executable, "-c", CANARY], env=checked, text=True,
                                capture_output=True).stdout.strip()
        if canary != "checked":
            print(f"boundscheck: NUMBA_BOUNDSCHECK=1 did not turn bounds checks on ({canary!r})")
            return 1
        t0 = time.monotonic()
        comp = subprocess.run([sys.executable, "-c", "import rxlab; "
                               "rxlab.simulate('default', duration=0.001)"], env=checked,
                              text=True, capture_output=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        print(f"boundscheck: compiled the bounds-checked loop in {time.monotonic() - t0:.0f} s "
              f"(peak {peak:.1f} GB) into {cache}", flush=True)
        if comp.returncode != 0:
            print(f"boundscheck: the compile run failed:\n{comp.stderr[-3000:]}")
            return 1
        cases = sample(args.quick)
        failures = []
        for c in cases:
            with tempfile.TemporaryDirectory(prefix="rxlab-bc-") as tmp:
                H.write_files(Path(tmp), c.files)
                out = H.run_cli(c.argv, tmp, RUN_TIMEOUT, 6 << 30, checked)
                verdict, detail = H.judge(c.expect, out, RUN_TIMEOUT)
                if "IndexError" in out.stderr:
                    verdict, detail = "FAIL", "out-of-range index: " + H._last_line(out.stderr)
                same = ""
                if verdict == "ok":
                    ref = H.run_cli(c.argv, tmp, RUN_TIMEOUT, 6 << 30, plain)
                    if ref.stdout != out.stdout:
                        verdict, detail = "FAIL", "result differs from the unchecked run"
                    same = ", equal to the unchecked run"
            print(f"  {verdict:5} {out.seconds:6.1f} s  {c.id}: {detail[:150]}{same}", flush=True)
            if verdict == "FAIL":
                failures.append(c.id)
        print(f"boundscheck: {len(cases)} runs with NUMBA_BOUNDSCHECK=1, "
              f"{len(failures)} failed{': ' + ', '.join(failures) if failures else ''}; "
              f"{time.monotonic() - t_start:.0f} s in all")
        return 1 if failures else 0
    finally:
        if not args.keep and not args.cache:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
