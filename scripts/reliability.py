#!/usr/bin/env python3
"""Rerun rxlab's reliability record: hostile inputs, fuzz, bounds-checked runs.

    .venv/bin/python scripts/reliability.py            # the hostile cases, printed
    .venv/bin/python scripts/reliability.py --write    # ... and their table in the doc
    .venv/bin/python scripts/reliability.py --all --write   # + fuzz counts, bounds check,
                                                            #   and the tests of other rows

The hostile cases are ``tests/support/hostile_cases.py`` (the same table
``tests/test_hostile_inputs.py`` asserts); ``--fuzz`` runs the generators of
``tests/test_fuzz_cli.py``; ``--boundscheck`` runs ``scripts/boundscheck.py``;
``--delegated`` runs the tests named by the rows that other tests prove (host apply
under signals, sweeps). ``--write`` replaces the generated parts of
``docs/reliability.md`` (between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``).
Exit status 1 if any case failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support import hostile_cases as H  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
GROUPS = {
    "baseline": "Baseline",
    "index": "Indices the compiled loop uses (queues, CPUs, contexts)",
    "cpus": "CPU sets",
    "memory": "Memory a scenario implies",
    "numbers": "Non-finite and extreme numbers",
    "files": "Malformed scenario files",
    "set": "`--set` paths and values",
    "capture": "Captures (`--pcap`)",
    "rollback": "Rollback files (`host rollback FILE`)",
    "sweep": "Sweep files",
    "commands": "Other commands",
    "outfiles": "Output folders and files (`--out`, `-o`): never replaced, refused in one line",
    "arguments": "Numeric arguments (bounded, the limit named) and booleans",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    text = _cell(text)
    return f"``{text}``" if "`" in text else f"`{text}`"


def cases_table(results: dict) -> str:
    out = []
    for g, title in GROUPS.items():
        rows = [c for c in H.CASES if c.group == g]
        if not rows:
            continue
        out += [f"#### {title}", "",
                "| case | input | command | expected | now |", "|---|---|---|---|---|"]
        for c in rows:
            verdict, detail, _ = results[c.id]
            now = "**FAILS**: " + detail if verdict == "FAIL" else (
                "exit 0, valid JSON" if verdict == "ok" else detail.removeprefix("rxlab: "))
            files = f" (files: {', '.join(sorted(c.files))})" if c.files else ""
            out.append(f"| {c.id} | {_cell(c.what)}{files} | {_code(H.argv_text(c))} | "
                       f"{c.expect} | {_cell(now[:300])} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def delegated_table(outcomes: dict) -> str:
    out = ["| case | what | proven by | now |", "|---|---|---|---|"]
    for d in H.DELEGATED:
        now = outcomes.get(d.test, "in the test suite; not rerun here (`--delegated` does)")
        out.append(f"| {d.id} | {_cell(d.what)} | `{d.test}` | {now} |")
    return "\n".join(out) + "\n"


def run_delegated() -> dict:
    out = {}
    for test in sorted({d.test for d in H.DELEGATED}):
        if not (ROOT / test.split("::")[0]).exists():
            out[test] = "**missing**"
            continue
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", test], cwd=ROOT,
                           capture_output=True, text=True)
        last = (p.stdout.strip().splitlines() or ["?"])[-1]
        out[test] = ("held" if p.returncode == 0 else "**FAILS**") + f" ({_cell(last)})"
    return out


def run_fuzz() -> str:
    from test_fuzz_cli import EXAMPLES, run_child

    lines = ["| generator | cases | accepted (simulated) | refused in one line | failures |",
             "|---|---|---|---|---|"]
    sample = []
    for kind in sorted(EXAMPLES):
        rep = run_child(kind, EXAMPLES[kind])
        n, acc, fails = rep["cases"], rep["accepted"], rep["failures"]
        lines.append(f"| {kind} | {n} | {acc} | {n - acc - len(fails)} | {len(fails)} |")
        print(f"fuzz {kind}: {n} cases, {acc} accepted, {len(fails)} failures")
        for f in fails[:10]:
            print(f"    {f['case'][:200]}\n      -> {f['error']}")
        sample += [H.Case(s["id"], s["what"], tuple(s["argv"]), "either", "fuzz",
                          {k: bytes.fromhex(v) for k, v in s["files"].items()})
                   for s in rep["sample"]]
    res = H.run_all(sample)
    bad = [c for c in sample if res[c.id][0] == "FAIL"]
    for c in bad:
        print(f"    {H.argv_text(c)} [{c.what[:150]}]\n      -> {res[c.id][1]}")
    ok = sum(res[c.id][0] == "ok" for c in sample)
    print(f"fuzz through the CLI: {len(sample)} cases, {len(bad)} failures")
    lines.append(f"| accepted cases again, through the CLI | {len(sample)} | {ok} | "
                 f"{len(sample) - ok - len(bad)} | {len(bad)} |")
    return "\n".join(lines) + "\n"


def run_boundscheck(log: str | None) -> str:
    """scripts/boundscheck.py's output as an indented block (or that of an earlier run,
    saved to ``log``: the compile takes minutes)."""
    if log:
        out = Path(log).read_text()
    else:
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "boundscheck.py")],
                             cwd=ROOT, capture_output=True, text=True).stdout
    print(out, end="")
    keep = [x for x in out.splitlines() if x.startswith("boundscheck:")]
    keep = [re.sub(r" into \S+", "", x) for x in keep]
    runs = [" ".join(x.split())[:150] for x in out.splitlines() if x.startswith("  ")]
    return "\n".join(f"    {x}" for x in keep[:1] + runs + keep[1:]) + "\n"


def replace(doc: str, name: str, body: str) -> str:
    pat = re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)
    if not pat.search(doc):
        raise SystemExit(f"{DOC}: no <!-- {name}:begin --> ... <!-- {name}:end --> markers")
    return pat.sub(lambda m: m.group(1) + body + m.group(2), doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="update docs/reliability.md")
    ap.add_argument("--fuzz", action="store_true", help="also run the fuzz generators")
    ap.add_argument("--boundscheck", action="store_true", help="also the bounds-checked run")
    ap.add_argument("--boundscheck-log", metavar="FILE",
                    help="with --boundscheck: record this saved output of "
                         "scripts/boundscheck.py instead of running it")
    ap.add_argument("--delegated", action="store_true", help="also the tests of other rows")
    ap.add_argument("--all", action="store_true", help="all of the above")
    ap.add_argument("--jobs", type=int, default=2, help="cases at a time (default 2)")
    ap.add_argument("-k", metavar="TEXT", help="only cases whose id or group contains TEXT")
    args = ap.parse_args()
    cases = [c for c in H.CASES if not args.k or args.k in c.id or args.k == c.group]
    if args.write and args.k:
        raise SystemExit("--write needs the whole table (no -k)")
    t0 = time.monotonic()

    def show(c, r):
        print(f"{r[0]:5} {c.expect:6} {r[2]:5.1f} s  {c.id}: {r[1][:140]}", flush=True)

    results = H.run_all(cases, workers=args.jobs, progress=show)
    failed = [c.id for c in cases if results[c.id][0] == "FAIL"]
    print(f"hostile inputs: {len(cases)} cases, {len(cases) - len(failed)} held, "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''} "
          f"({time.monotonic() - t0:.0f} s)")
    doc = DOC.read_text() if args.write else ""
    if args.write:
        doc = replace(doc, "cases", cases_table(results))
        doc = replace(doc, "summary", f"{len(cases)} cases: {len(cases) - len(failed)} held, "
                      f"{len(failed)} failed{' (' + ', '.join(failed) + ')' if failed else ''}."
                      "\n")
    if args.delegated or args.all:
        outcomes = run_delegated()
        print("\n".join(f"{k}: {v}" for k, v in outcomes.items()))
        if args.write:
            doc = replace(doc, "delegated", delegated_table(outcomes))
    elif args.write:
        doc = replace(doc, "delegated", delegated_table({}))
    if args.fuzz or args.all:
        table = run_fuzz()
        if args.write:
            doc = replace(doc, "fuzz", table)
    if args.boundscheck or args.all:
        text = run_boundscheck(args.boundscheck_log)
        if args.write:
            doc = replace(doc, "boundscheck", text)
    if args.write:
        DOC.write_text(doc)
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
