#!/usr/bin/env python3
"""Run a sample of scenarios with numba's bounds checking on (``NUMBA_BOUNDSCHECK=1``).

The compiled loop indexes its arrays without checks; an index the validation let through
would read or write out of range silently. Here every jitted function is compiled with
bounds checks, so such an index raises ``IndexError`` instead, and the run fails. The
sample: the built-in scenarios, two richer scenarios that use most sections (RPS, RFS,
flow limit, n-tuple rules, RSS contexts, migration, cost jitter, XDP, AF_XDP), aRFS under
churn with the ice and mlx5 filter paths, the
hostile command lines that may be accepted (``tests/support/hostile_cases.py``), two
``rxlab reproduce --quick`` experiments (each result must equal the unchecked run's),
and the fuzz generators of ``tests/test_fuzz_cli.py``, whose every accepted case
simulates 2 ms under the checks.

The bounds-checked code goes to its own numba cache (a temporary folder, removed at the
end unless --keep), never to the normal one. Compiling it takes minutes and ~2.5 GB.
That compile starts from an empty cache, so it also shows each loop function's
signatures: one each, or the run fails (a second signature is a second copy of the
function and of everything it inlines, paid on every cold start; docs/performance.md).

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
from support import hostile_cases as H  # noqa: E402

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


# the modules of the compiled loop, whose every function must compile once
LOOP_MODULES = (
    "rxlab.engine.core", "rxlab.engine.rng",
    "rxlab.kernel.accounting", "rxlab.kernel.backlog", "rxlab.kernel.flow_limit",
    "rxlab.kernel.hashfn", "rxlab.kernel.napi", "rxlab.kernel.napi_thread",
    "rxlab.kernel.nic_rx", "rxlab.kernel.rfs", "rxlab.kernel.rps",
    "rxlab.kernel.rx_loop", "rxlab.kernel.sched", "rxlab.kernel.socket",
    "rxlab.nic.arfs", "rxlab.nic.arfs_steer",
    "rxlab.xdp.cpumap", "rxlab.xdp.program", "rxlab.xdp.xsk_rx",
)
# compiles the loop (from an empty cache: every callee is compiled, not loaded) and
# prints each loop function's signatures as JSON
SIGNATURES = """
import importlib, json, sys
import rxlab
from numba.core.registry import CPUDispatcher
rxlab.simulate("cpumap", duration=0.001)
out = {}
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    for attr, fn in vars(mod).items():
        if isinstance(fn, CPUDispatcher) and fn.__module__ == name:
            out[name + "." + attr] = [str(sig) for sig in fn.signatures]
print(json.dumps(out))
"""


def one_signature_each(stdout: str) -> list[str]:
    """The loop functions compiled with more than one signature (none is right)."""
    import json

    sigs = json.loads(stdout.strip().splitlines()[-1])
    if len(sigs.get("rxlab.kernel.rx_loop.run", [])) != 1:
        return ["rxlab.kernel.rx_loop.run was not compiled once"]
    return [f"{name}: {len(s)} signatures {s}" for name, s in sigs.items() if len(s) > 1]


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
    from support.rfs_harness import rfs_dict, tcp_group

    for model in ("ice-hash-match", "mlx5"):  # aRFS under churn: steer, lock, walk, scan
        d = rfs_dict(cpus=8, version="6.15", flow_cnt=64, entries=8 * 64, duration=0.05,
                     arfs={"model": model},
                     groups=[tcp_group(flows=512, pps=200_000)],
                     apps=[{"name": "app", "cpus": "0-3", "spread": "round_robin",
                            "cost": {"user_ns": 200}}])
        out.append(H.Case(f"arfs-{model}", f"aRFS churn on 8 CPUs ({model})",
                          ("run", "s.yaml", "--json"), "ok", "rich",
                          {"s.yaml": yaml.safe_dump(d, sort_keys=False)}))
    if not quick:
        # judged as "either" here: whether rxlab refuses one is the case table's question
        out += [H.Case(c.id, c.what, c.argv, "either", c.group, c.files, c.timeout)
                for c in H.CASES if c.expect in ("ok", "either") and c.argv[0] == "run"]
        for exp in ("flow-limit", "cpumap"):
            out.append(H.Case(f"reproduce-{exp}", f"rxlab reproduce {exp} --quick",
                              ("reproduce", exp, "--quick", "--json"), "ok", "reproduce"))
    return out


def fuzz_checked(env: dict) -> tuple[list[str], int]:
    """The fuzz generators of tests/test_fuzz_cli.py in a bounds-checked child: each
    accepted scenario, --set or capture simulates 2 ms; an IndexError is a failure."""
    from test_fuzz_cli import EXAMPLES, run_child

    os.environ.update(NUMBA_BOUNDSCHECK=env["NUMBA_BOUNDSCHECK"],
                      NUMBA_CACHE_DIR=env["NUMBA_CACHE_DIR"])
    failed, simulated = [], 0
    for kind in ("capture", "scenario", "set"):
        t0 = time.monotonic()
        try:
            rep = run_child(kind, EXAMPLES[kind])
        except BaseException as err:  # noqa: BLE001 - pytest.fail: the child died
            print(f"  FAIL  fuzz {kind}: {err}")
            failed.append(f"fuzz-{kind}")
            continue
        for f in rep["failures"]:
            print(f"  FAIL  fuzz {kind}: {f['case'][:200]}\n        -> {f['error']}")
        print(f"  {'FAIL' if rep['failures'] else 'ok':5} {time.monotonic() - t0:6.1f} s  "
              f"fuzz {kind}: {rep['cases']} cases, {rep['accepted']} simulated, "
              f"{len(rep['failures'])} failures", flush=True)
        if rep["failures"]:
            failed.append(f"fuzz-{kind}")
        simulated += rep["accepted"]
    return failed, simulated


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
        reused = any(cache.rglob("rx_loop.run-*.nbi"))
        t0 = time.monotonic()
        comp = subprocess.run([sys.executable, "-c", SIGNATURES, *LOOP_MODULES],
                              env=checked, text=True, capture_output=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        what = "loaded the bounds-checked loop compiled earlier" if reused else \
            "compiled the bounds-checked loop"
        print(f"boundscheck: {what} in {time.monotonic() - t0:.0f} s (peak {peak:.1f} GB) "
              f"into {cache}", flush=True)
        if comp.returncode != 0:
            print(f"boundscheck: the compile run failed:\n{comp.stderr[-3000:]}")
            return 1
        if not reused:
            many = one_signature_each(comp.stdout)
            print("boundscheck: every loop function compiled with one signature" if not many
                  else "boundscheck: FAIL " + "; ".join(many), flush=True)
            if many:
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
        fuzzed = 0
        if not args.quick:  # every accepted fuzz case simulates under the checks too
            bad, fuzzed = fuzz_checked(checked)
            failures += bad
        print(f"boundscheck: {len(cases)} runs and {fuzzed} simulated fuzz cases with "
              "NUMBA_BOUNDSCHECK=1, "
              f"{len(failures)} failed{': ' + ', '.join(failures) if failures else ''}; "
              f"{time.monotonic() - t_start:.0f} s in all")
        return 1 if failures else 0
    finally:
        if not args.keep and not args.cache:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
