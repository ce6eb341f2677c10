"""``rxlab report DIR``: one self-contained HTML page for a sweep's output folder.

Everything is inline (CSS, plots as base64 PNG), so the page opens offline; no script.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import os
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.report.fit import fmt_metric
from rxlab.report.printable import printable
from rxlab.sweep import store
from rxlab.sweep.metrics import METRICS
from rxlab.sweep.plots import fmt, make_plots, varying

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.88em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .55em;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.p,th.p{text-align:left;background:#fafafa}
td.id{font-family:monospace;text-align:left}
.meta td{text-align:left}.meta th{text-align:left}
figure{display:inline-block;margin:.5em;vertical-align:top}
figure img{max-width:520px;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
.ci{color:#777;font-size:.9em}.scroll{overflow-x:auto}
pre{background:#f7f7f7;padding:.8em;font-size:.8em;overflow-x:auto}
"""


def load(out: Path) -> tuple[dict, list[dict]]:
    """The sweep's spec and its table rows (rebuilt from the run files without a table)."""
    if not (out / store.SPEC).is_file():
        raise UsageError(f"{out}: not a sweep output folder (no {store.SPEC}; run "
                         "`rxlab sweep FILE --out DIR` first)")
    spec = store.read_spec(out)
    ids = [r["run_id"] for r in spec["runs"]]
    if os.path.lexists(out / store.TABLE):  # a FIFO or a damaged table: one line
        rows = store.read_table(out, spec["metrics"])
        planned = set(ids)
        rows = [r for r in rows if r["run_id"] in planned]
    else:
        recs = [r for r in (store.read_run(out, i, strict=True) for i in ids)
                if r is not None]
        rows = store.rows_from_records(recs, spec["param_paths"])
    if not rows:
        raise UsageError(f"{out}: the sweep has no finished runs yet")
    return spec, rows


def _e(x) -> str:
    # a sweep or parameter name may hold control characters or a lone surrogate, which
    # no UTF-8 file can hold: shown escaped (rxlab.report.printable)
    return html.escape(printable(str(x)))


def _table(head: list[str], body: list[list[str]], pcols: int, cls: str, tid: str) -> str:
    h = "".join(f'<th class="p">{_e(c)}</th>' if i < pcols else f"<th>{_e(c)}</th>"
                for i, c in enumerate(head))
    trs = []
    for row in body:
        tds = "".join(f'<td class="p">{c}</td>' if i < pcols else f"<td>{c}</td>"
                      for i, c in enumerate(row))
        trs.append(f"<tr>{tds}</tr>")
    return (f'<div class="scroll"><table class="{cls}" id="{tid}"><thead><tr>{h}</tr></thead>'
            f"<tbody>{''.join(trs)}</tbody></table></div>")


def build_report(out: str | Path, title: str | None = None) -> str:
    out = Path(out)
    spec, rows = load(out)
    params, metrics = spec["param_paths"], spec["metrics"]
    summary = store.summarize(rows, params, metrics)
    skipped: list[str] = []
    plots = make_plots(rows, params, metrics, skipped)
    name = spec.get("name", "sweep")
    title = title or f"rxlab sweep: {name}"
    total = len(spec["runs"])
    workers = sorted({str(r.get("worker")) for r in rows if r.get("worker")})
    cpu = sum(float(r.get("wall_s") or 0) for r in rows)
    base = spec["base"]
    vary = varying(rows, params)

    meta = [
        ("sweep", name), ("description", spec.get("description") or ""),
        ("sweep file", spec.get("source", "")),
        ("base scenario", f"{base.get('name', '')} (duration {base.get('duration')} s, "
                          f"kernel {base.get('host', {}).get('kernel', '')})"),
        ("parameters", "; ".join(f"{p}: {', '.join(fmt(v) for v in _vals(spec, p))}"
                                 for p in params) or "none (replications only)"),
        ("seeds", ", ".join(str(s) for s in spec["seeds"])),
        ("runs", f"{len(rows)} of {total} finished ({len(spec['points'])} parameter points "
                 f"x {len(spec['seeds'])} seeds)"),
        ("simulation time", f"{cpu:.2f} s summed over runs on {len(workers)} worker processes"),
        ("generated", _dt.datetime.now().isoformat(timespec="seconds")),
    ]
    meta = [(k, v) for k, v in meta if v]
    meta_html = "<table class=\"meta\" id=\"meta\">" + "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in meta) + "</table>"

    s_head = [*params, "n", *metrics]
    s_body = []
    for e in summary:
        cells = [_e(fmt(e["params"][p])) for p in params] + [str(e["n"])]
        for m in metrics:
            mean, ci = e["stats"][m]
            # units by magnitude (ns/us/ms, pps/Kpps/Mpps, %), as the terminal table
            ci_txt = f' <span class="ci">± {_e(fmt_metric(m, ci, ci=True))}</span>' \
                if ci == ci else ""
            cells.append(f"{_e(fmt_metric(m, mean))}{ci_txt}")
        s_body.append(cells)
    summary_html = _table(s_head, s_body, len(params), "summary", "summary-table")

    figs = []
    for p in plots:
        b64 = base64.b64encode(p.png).decode()
        figs.append(f'<figure class="plot {p.kind}"><img alt="{_e(p.title)}" '
                    f'src="data:image/png;base64,{b64}"><figcaption>{_e(p.title)}'
                    "</figcaption></figure>")
    plots_html = "".join(figs) if figs else (
        "<p>No plots: no parameter takes more than one value." if not vary else "")
    if skipped:
        plots_html += '<p class="ci" id="plots-skipped">Not plotted: ' + "; ".join(
            _e(s) for s in skipped) + ".</p>"

    shown = [m for m in dict.fromkeys(["offered", "dropped", *metrics]) if m in rows[0]]
    r_head = ["run_id", "seed", *params, *shown, "wall_s", "worker"]
    r_body = []
    for r in sorted(rows, key=lambda r: (r["point"], r["rep"])):
        r_body.append([f'<span class="id">{_e(r["run_id"])}</span>', str(r["seed"]),
                       *[_e(fmt(r.get(p))) for p in params],
                       *[_e(fmt_metric(m, r.get(m))) for m in shown],
                       _e(fmt(r.get("wall_s"))), _e(r.get("worker") or "")])
    runs_html = _table(r_head, r_body, 2 + len(params), "runs", "runs-table")

    legend = "".join(f"<li><b>{_e(m)}</b>: {_e(METRICS[m][0])}</li>" for m in metrics
                     if m in METRICS)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{CSS}</style></head>
<body>
<h1 id="title">{_e(title)}</h1>
<section id="overview"><h2>Overview</h2>{meta_html}<ul class="legend">{legend}</ul></section>
<section id="summary"><h2>Summary</h2>
<p>Mean over the seeds of each parameter point ± the half-width of the 95% confidence
interval of the mean (Student t; none with one seed).</p>{summary_html}</section>
<section id="plots"><h2>Plots</h2>{plots_html}</section>
<section id="runs"><h2>Runs</h2>{runs_html}</section>
<section id="base"><h2>Base scenario</h2><details><summary>scenario as run (before the
sweep's parameters and seed)</summary><pre>{_e(json.dumps(base, indent=1))}</pre></details>
</section>
<footer><p class="ci">rxlab sweep report, {len(rows)} runs.</p></footer>
</body></html>
"""


def _vals(spec: dict, path: str) -> list:
    seen: dict[str, object] = {}
    for pt in spec["points"]:
        if path in pt:
            seen.setdefault(json.dumps(pt[path], sort_keys=True), pt[path])
    return list(seen.values())


def write_report(out: str | Path, dest: str | Path | None = None) -> Path:
    out = Path(out)
    dest = Path(dest) if dest else out / "report.html"
    text = build_report(out)
    store.atomic_write(dest, text)
    return dest
