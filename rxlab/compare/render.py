"""``compare --out DIR``: comparison.json, a PNG (a panel per metric: each configuration's
mean with its 95 % interval) and a self-contained HTML page (table and PNG inline)."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import math
from pathlib import Path

from rxlab.compare.table import MARK, fmt_value

_TIME = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
_RATE = ((1e9, "Gpps"), (1e6, "Mpps"), (1e3, "Kpps"), (1.0, "pps"))
_PER_S = ((1e9, "G/s"), (1e6, "M/s"), (1e3, "K/s"), (1.0, "/s"))  # events, not packets
COLS = 3  # panels per row
BASE_COLOR, SIG_COLOR, SAME_COLOR = "#444444", "#d55e00", "#0072b2"


def _unit(kind: str, top: float) -> tuple[float, str]:
    if kind in ("time", "rate", "per_s"):
        table = {"time": _TIME, "rate": _RATE, "per_s": _PER_S}[kind]
        return next(((d, u) for d, u in table if top >= d), table[-1])
    if kind == "fraction":
        return 0.01, "%"
    return 1.0, ""


def _range(kind: str) -> tuple[float, float]:
    """Values the metric can take: all are >= 0, shares are at most 1."""
    return (0.0, 1.0) if kind == "fraction" else (0.0, math.inf)


def plotted(cmp: dict) -> tuple[list[dict], list[str]]:
    """Metrics worth a panel (some run not zero) and the labels of the rest."""
    show, zero = [], []
    for m in cmp["metrics"]:
        vals = [v for vs in m["values"].values() for v in vs if v is not None]
        (show if any(v != 0 for v in vals) else zero).append(m)
    return show, [m["label"] for m in zero]


def figure_png(cmp: dict) -> bytes | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    metrics, _ = plotted(cmp)
    if not metrics:
        return None
    names = [c["name"] for c in cmp["configurations"]]
    base = cmp["baseline"]
    rows = math.ceil(len(metrics) / COLS)
    h = 0.32 * len(names) + 1.0
    fig, axes = plt.subplots(rows, COLS, figsize=(4.6 * COLS, h * rows), squeeze=False)
    ypos = list(range(len(names)))[::-1]  # the first configuration on top
    for ax, m in zip(axes.flat, metrics, strict=False):
        lo_ok, hi_ok = _range(m["kind"])
        means = [m["mean"][n]["estimate"] for n in names]
        halves = [m["mean"][n]["ci95"] or 0.0 for n in names]
        top = max((abs(v) + hw for v, hw in zip(means, halves, strict=True)
                   if v is not None), default=0.0)
        div, unit = _unit(m["kind"], top)
        for y, n, v, hw in zip(ypos, names, means, halves, strict=True):
            if v is None:
                continue
            lo, hi = max(lo_ok, v - hw), min(hi_ok, v + hw)  # clipped to the metric's range
            d = m["diff"].get(n)
            color = BASE_COLOR if n == base else (SIG_COLOR if d and d["significant"]
                                                  else SAME_COLOR)
            ax.errorbar([v / div], [y], xerr=[[(v - lo) / div], [(hi - v) / div]], fmt="o",
                        color=color, capsize=4, ms=5,
                        mfc=color if n == base or (d and d["significant"]) else "white")
        ax.set_yticks(ypos, names, fontsize=8)
        ax.set_ylim(-0.6, len(names) - 0.4)
        # every metric here is >= 0: 0 stays in sight; room right of the longest bar
        right = min(hi_ok, top) / div * 1.08 or 1.0
        ax.set_xlim(0.0, min(100.0, right) if m["kind"] == "fraction" else right)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(FuncFormatter(
            lambda v, _p: "0" if v == 0 else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}")))
        ax.tick_params(axis="x", labelsize=8)
        ax.set_title(f"{m['label']}" + (f" ({unit})" if unit else ""), fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=BASE_COLOR, marker="o", ls="", label=f"{base} (baseline)"),
               Line2D([], [], color=SIG_COLOR, marker="o", ls="",
                      label=f"differs from {base} (95 % CI of the difference excludes 0)"),
               Line2D([], [], color=SAME_COLOR, marker="o", mfc="white", ls="",
                      label=f"no significant difference from {base}")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"mean ± 95 % CI over {len(cmp['configurations'][0]['seeds'])} seeds "
                 "(bars clipped to the metric's range)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _e(x) -> str:
    return html.escape(str(x))


def _cell(kind: str, iv: dict, diff: bool = False) -> str:
    """The estimate above its ± half-width: two short lines keep 4+ configurations
    within the page's width."""
    est = fmt_value(kind, iv["estimate"], signed=diff)
    half = ("" if iv["ci95"] is None else
            f'<br><span class="ci">± {_e(fmt_value(kind, iv["ci95"]))}</span>')
    if diff and iv["significant"]:
        return f'<td class="sig">{_e(est)} {MARK}{half}</td>'
    return f"<td>{_e(est)}{half}</td>"


def html_page(cmp: dict, png: bytes | None) -> str:
    from rxlab.sweep.report import CSS

    cfg = cmp["configurations"]
    names = [c["name"] for c in cfg]
    head = ["metric", names[0]]
    for n in names[1:]:
        head += [n, f"Δ {n}"]
    trs = []
    for m in cmp["metrics"]:
        cells = [f'<td class="p">{_e(m["label"])}</td>', _cell(m["kind"], m["mean"][names[0]])]
        for n in names[1:]:
            cells += [_cell(m["kind"], m["mean"][n]), _cell(m["kind"], m["diff"][n], True)]
        trs.append(f"<tr>{''.join(cells)}</tr>")
    ths = "".join(f'<th class="p">{_e(h)}</th>' if i == 0 else f"<th>{_e(h)}</th>"
                  for i, h in enumerate(head))
    table = (f'<div class="scroll"><table class="summary" id="comparison-table"><thead><tr>'
             f"{ths}</tr></thead><tbody>{''.join(trs)}</tbody></table></div>")
    conf = "".join(
        f"<tr><td class=\"p\">{_e(c['name'])}</td><td class=\"p\">{_e(c['source'])}</td>"
        f"<td class=\"p\">{_e(', '.join(f'{k}={v}' for k, v in c['overrides'].items()))}</td>"
        f"<td>{_e(c['kernel'])}</td><td>{_e(c['duration_s'])} s</td>"
        f"<td>{_e(', '.join(str(s) for s in c['seeds']))}</td></tr>" for c in cfg)
    conf_html = ('<table class="meta" id="configurations"><thead><tr><th>name</th>'
                 "<th>scenario</th><th>overrides</th><th>kernel</th><th>duration</th>"
                 f"<th>seeds</th></tr></thead><tbody>{conf}</tbody></table>")
    _, zero = plotted(cmp)
    fig = ("<p>No plot: every metric is zero in every run.</p>" if png is None else
           '<figure class="plot"><img id="comparison-plot" alt="comparison plot" '
           f'src="data:image/png;base64,{base64.b64encode(png).decode()}"></figure>')
    if zero and png is not None:
        fig += f'<p class="ci">Not plotted (zero in every run): {_e(", ".join(zero))}.</p>'
    how = ("paired t interval over the per-seed differences (every configuration ran the "
           "same seeds, so a seed's traffic is shared)" if cmp["paired"] else
           "Welch t interval (the configurations ran different seeds)")
    title = f"rxlab compare: {', '.join(names)}"
    # the comparison table's headers wrap (names, "Δ name"): with 4 configurations the
    # page scrolled sideways for headers alone; the cells are two short lines each
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{CSS}
td.sig{{font-weight:bold;color:{SIG_COLOR}}}figure img{{max-width:100%}}
#comparison-table th{{white-space:normal;overflow-wrap:anywhere;min-width:4.5em}}</style></head>
<body>
<h1 id="title">{_e(title)}</h1>
<section id="overview"><h2>Configurations</h2>{conf_html}</section>
<section id="summary"><h2>Comparison</h2>
<p>Mean over the seeds ± the half-width of its 95 % interval (Student t); Δ: the
difference against {_e(cmp['baseline'])}, {_e(how)}. {MARK} and bold: the difference's
95 % interval excludes 0.</p>{table}</section>
<section id="plots"><h2>Plot</h2>{fig}</section>
<footer><p class="ci">rxlab compare, {len(cfg)} configurations x {len(cfg[0]['seeds'])}
seeds, generated {_dt.datetime.now().isoformat(timespec="seconds")}.</p></footer>
</body></html>
"""


def write_out(cmp: dict, out: str | Path, *, screenshot: bool = False,
              force: bool = False) -> list[Path]:
    """comparison.json, comparison.png (if any metric is not zero everywhere),
    comparison.html and, with ``screenshot``, comparison-page.png; each written whole,
    beside nothing but rxlab's own files (rxlab.outfiles)."""
    from rxlab.jsonout import dumps
    from rxlab.outfiles import OutDir

    png = figure_png(cmp)
    with OutDir(out, force=force) as tmp:
        (tmp / "comparison.json").write_text(dumps(cmp, indent=1) + "\n")
        if png is not None:
            (tmp / "comparison.png").write_bytes(png)
        (tmp / "comparison.html").write_text(html_page(cmp, png))
        if screenshot:
            from rxlab.report.screenshot import render

            render(tmp / "comparison.html", tmp / "comparison-page.png")
        names = sorted(p.name for p in tmp.iterdir())
    order = ["comparison.json", "comparison.png", "comparison.html", "comparison-page.png"]
    return [Path(out) / n for n in order if n in names]
