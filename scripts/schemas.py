#!/usr/bin/env python3
"""Write (or --check) the output schemas rxlab ships and docs/output.md's field tables,
both generated from rxlab/metrics/schema.py.

    .venv/bin/python scripts/schemas.py          # write rxlab/schemas/*.json, docs/output.md
    .venv/bin/python scripts/schemas.py --check  # exit 1 if either is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rxlab.metrics.schema import SCHEMAS, json_schema, markdown  # noqa: E402

DOC = ROOT / "docs" / "output.md"
BEGIN, END = "<!-- schema:begin -->", "<!-- schema:end -->"


def files() -> dict[Path, str]:
    out = {ROOT / "rxlab" / "schemas" / f"{n}.schema.json":
           json.dumps(json_schema(n), indent=1, sort_keys=True) + "\n" for n in SCHEMAS}
    doc = DOC.read_text()
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    body = "\n".join(markdown(n) for n in SCHEMAS)
    out[DOC] = f"{head}{BEGIN}\n\n{body}\n{END}{tail}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    stale = [p for p, text in files().items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"{p.relative_to(ROOT)}: out of date; run scripts/schemas.py", file=sys.stderr)
        return 1 if stale else 0
    for p, text in files().items():
        p.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
