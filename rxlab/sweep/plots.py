"""Sweep plots (matplotlib, no pyplot state): a metric against one parameter with 95 % CI
bands, and heatmaps of a metric over two parameters. Figures render to PNG bytes.

A mean is taken over the seeds only: every combination of the other varying parameters is
a line of its own (or a panel), never pooled. Latencies and rates are drawn in a unit
chosen by magnitude (us, ms; Kpps, Mpps), bands stay inside the metric's range (0 and up;
0 to 1 for fractions), and a metric that is zero or missing in every run is not drawn.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from rxlab.sweep import store
from rxlab.sweep.metrics import METRICS, mean_ci

MAX_SERIES = 6  # lines per panel; more combinations of the other parameters: facets
MAX_PANELS = 12  # facets per figure; more than this and the line plot is left out
MAX_PAIRS = 3  # heatmaps for at most this many parameter pairs
MAX_ANNOTATED = 12  # write the value in each heatmap cell up to this many rows/columns
UNSET = "unset"  # a sweep point that does not set the parameter


@dataclass
class Plot:
    kind: str  # "line" or "heatmap"
    name: str  # file stem
    title: str
    metric: str
    params: tuple[str, ...]
    png: bytes


def _key(v) -> str:
    return json.dumps(v, sort_keys=True)


def _is_num(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _label(v) -> str:
    if v is None:
        return UNSET
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if v.is_integer() and abs(v) >= 1e4 else f"{v:g}"
    return str(v) if not isinstance(v, dict | list) else _key(v)


def ordered_values(rows: list[dict], param: str) -> list:
    vals = {}
    for r in rows:
        vals.setdefault(_key(r.get(param)), r.get(param))
    out = list(vals.values())
    if all(_is_num(v) for v in out):
        out.sort()
    return out


def varying(rows: list[dict], params: list[str]) -> list[str]:
    return [p for p in params if len(ordered_values(rows, p)) > 1]


def metric_label(metric: str) -> str:
    unit = METRICS.get(metric, ("", ""))[1]
    return f"{metric} ({unit})" if unit else metric


# ---------------------------------------------------------------- units and ranges
_TIME = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
_RATE = ((1e9, "Gpps"), (1e6, "Mpps"), (1e3, "Kpps"), (1.0, "pps"))
_FRACTION_WORDS = ("fraction", "util", "idle", "_frac", "share")


def _kind(metric: str) -> str:
    """time (ns), rate (pps), fraction (0..1) or count, from the metric's name."""
    k = metric.lower()
    if "latency" in k or k.endswith("_ns"):
        return "time"
    if k.endswith("pps"):
        return "rate"
    if any(w in k for w in _FRACTION_WORDS):
        return "fraction"
    return "count"


def _values(rows: list[dict], metric: str) -> list[float]:
    out = []
    for r in rows:
        v = r.get(metric)
        if _is_num(v) and math.isfinite(v):
            out.append(float(v))
    return out


def has_data(rows: list[dict], metric: str) -> bool:
    """A metric worth a plot: some run has a finite value other than zero."""
    return any(v != 0 for v in _values(rows, metric))


def scale(rows: list[dict], metric: str) -> tuple[float, str, float, float]:
    """(divisor, axis label, lowest, highest): the unit is chosen by the magnitude of the
    metric's largest value; a band never leaves the range the metric can take."""
    vals = _values(rows, metric)
    top = max((abs(v) for v in vals), default=0.0)
    kind = _kind(metric)
    lo = 0.0 if kind != "count" or metric in METRICS or metric.startswith("drop_") \
        or all(v >= 0 for v in vals) else -math.inf
    if kind in ("time", "rate"):
        div, unit = next(((d, u) for d, u in (_TIME if kind == "time" else _RATE)
                          if top >= d), (1.0, "ns" if kind == "time" else "pps"))
        name = metric[:-3] if kind == "time" and metric.endswith("_ns") else metric
        return div, f"{name} ({unit})", lo, math.inf
    if kind == "fraction":
        return 1.0, f"{metric} (fraction, 0 to 1)", 0.0, 1.0
    return 1.0, metric_label(metric), lo, math.inf


def _tick(v: float, _pos=None) -> str:
    """Plain tick labels (no offset, no 1e6 multiplier), thousands separated."""
    if v == 0:
        return "0"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _plain_y(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(_tick))


def _axis(ax, values: list, param: str, which: str = "x"):
    """Positions for the values; numeric parameters on a numeric (maybe log) axis."""
    if all(_is_num(v) for v in values):
        pos = [float(v) for v in values]
        if min(pos) > 0 and max(pos) / min(pos) >= 16:
            (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
        (ax.set_xticks if which == "x" else ax.set_yticks)(pos, [_label(v) for v in values])
        ax.minorticks_off()
    else:
        pos = list(range(len(values)))
        (ax.set_xticks if which == "x" else ax.set_yticks)(pos, [_label(v) for v in values])
    return pos


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _combo_label(params: list[str], vals: list, sep: str = ", ") -> str:
    return sep.join(f"{p}={_label(v)}" for p, v in zip(params, vals, strict=True))


def _split(rows: list[dict], others: list[str]) -> int:
    """How many of the other parameters make facets: the fewest that leave each panel at
    most MAX_SERIES lines (the rest are lines)."""
    for k in range(len(others) + 1):
        lines = {_key([r.get(o) for o in others[k:]]) for r in rows}
        if len(lines) <= MAX_SERIES:
            return k
    return len(others)


def _panels(n: int, single: tuple[float, float], each: tuple[float, float]):
    """A figure of n panels, at most three a row, sharing their axes."""
    from matplotlib.figure import Figure  # imported late: matplotlib is slow to import

    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=single) if n == 1 else \
        Figure(figsize=(each[0] * ncols, each[1] * nrows), layout="constrained")
    return fig, fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()


def line_figure(rows: list[dict], param: str, metric: str, others: list[str],
                with_: list[str] = ()):
    """The metric against ``param``: a mean over the seeds only, one line per combination
    of the other varying parameters (facets when there are many), 95 % CI bands clipped
    to the metric's range. None when the metric has no data or needs too many facets."""

    if not has_data(rows, metric):
        return None
    others = list(others)
    k = _split(rows, others)
    facet_ps, line_ps = others[:k], others[k:]
    facets: dict[str, list[dict]] = {}
    for r in rows:
        facets.setdefault(_key([r.get(o) for o in facet_ps]), []).append(r)
    if len(facets) > MAX_PANELS:
        return None
    series = {}  # every line's key -> its values, in first-seen order: one colour each
    for r in rows:
        series.setdefault(_key([r.get(o) for o in line_ps]), [r.get(o) for o in line_ps])
    # a legend names only the parameters that tell its lines apart
    shown = [i for i, _ in enumerate(line_ps) if len({_key(v[i]) for v in series.values()}) > 1]
    div, ylabel, lo_b, hi_b = scale(rows, metric)
    xs = ordered_values(rows, param)

    n = len(facets)
    fig, axs = _panels(n, (6.4, 4.0), (4.2, 3.2))
    handles: dict[str, object] = {}
    for ax, (fkey, frows) in zip(axs, facets.items(), strict=False):
        pos = _axis(ax, xs, param)
        for ci_, (skey, svals) in enumerate(series.items()):
            rs = [r for r in frows if _key([r.get(o) for o in line_ps]) == skey]
            if not rs:
                continue
            means, lo, hi = [], [], []
            for x in xs:
                m, ci, _ = mean_ci([r.get(metric) for r in rs if _key(r.get(param)) == _key(x)])
                m /= div
                ci = 0.0 if math.isnan(ci) else ci / div
                means.append(m)
                lo.append(min(max(m - ci, lo_b), hi_b))
                hi.append(max(min(m + ci, hi_b), lo_b))
            label = _combo_label([line_ps[i] for i in shown], [svals[i] for i in shown])
            line = ax.plot(pos, means, marker="o", color=f"C{ci_ % 10}",
                           label=label or "mean over seeds")[0]
            ax.fill_between(pos, lo, hi, alpha=0.2, color=line.get_color(), linewidth=0)
            handles.setdefault(label, line)
        if facet_ps:
            ax.set_title(_combo_label(facet_ps, json.loads(fkey), "\n"), fontsize="small")
        ax.grid(True, alpha=0.3)
        _plain_y(ax)
    bottom, top = axs[0].get_ylim()  # shared by the panels: clamp once all are drawn
    axs[0].set_ylim(max(bottom, lo_b), min(top, hi_b))
    for ax in axs[n:]:
        ax.set_visible(False)
    xlabel = param + (f" (with {', '.join(with_)})" if with_ else "")
    if n == 1:
        axs[0].set_xlabel(xlabel)
        axs[0].set_ylabel(ylabel)
        axs[0].set_title(f"{ylabel} vs {param} (mean over seeds, 95% CI band)")
    else:
        for ax in axs[:n]:  # supxlabel would sit under the legend
            ax.set_xlabel(xlabel)
        fig.supylabel(ylabel)
        fig.suptitle(f"{ylabel} vs {param} (mean over seeds, 95% CI band)")
    labels = [lbl for lbl in handles if lbl]
    if labels:  # beside the axes (right, or below the panels): never over a line
        if n == 1:
            axs[0].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                          borderaxespad=0)
        else:
            fig.legend([handles[lbl] for lbl in labels], labels, fontsize="small",
                       loc="outside lower center", ncols=min(2, len(labels)))
    return fig


def line_plot(rows: list[dict], param: str, metric: str, others: list[str],
              with_: list[str] = ()) -> bytes | None:
    fig = line_figure(rows, param, metric, others, with_)
    return None if fig is None else _png(fig)


def heatmap_figure(rows: list[dict], px: str, py: str, metric: str, others: list[str] = ()):
    """Mean over the seeds in each cell, one panel per combination of the other varying
    parameters; None when no cell holds a value other than 0, or too many panels."""
    import numpy as np

    xs, ys = ordered_values(rows, px), ordered_values(rows, py)
    others = list(others)
    div, clabel, _, _ = scale(rows, metric)
    facets: dict[str, list[dict]] = {}
    for r in rows:
        facets.setdefault(_key([r.get(o) for o in others]), []).append(r)
    if len(facets) > MAX_PANELS:
        return None
    grids = {}
    for fkey, frows in facets.items():
        grid = np.full((len(ys), len(xs)), np.nan)
        for j, y in enumerate(ys):
            for i, x in enumerate(xs):
                vals = [r.get(metric) for r in frows
                        if _key(r.get(px)) == _key(x) and _key(r.get(py)) == _key(y)]
                grid[j, i] = mean_ci(vals)[0] / div
        grids[fkey] = grid
    finite = np.concatenate([g[np.isfinite(g)] for g in grids.values()])
    if not finite.size or not finite.any():
        return None
    n = len(grids)
    fig, axs = _panels(n, (6.4, 4.8), (4.4, 3.6))
    from matplotlib.colors import LogNorm, Normalize

    if finite.min() > 0 and finite.max() / finite.min() >= 50:
        norm = LogNorm(finite.min(), finite.max())  # a skewed metric (latency under overload)
    else:
        norm = Normalize(finite.min(), finite.max())
    annotate = len(xs) <= MAX_ANNOTATED and len(ys) <= MAX_ANNOTATED
    im = None
    for ax, (fkey, grid) in zip(axs, grids.items(), strict=False):
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", norm=norm)
        ax.set_xticks(range(len(xs)), [_label(v) for v in xs])
        ax.set_yticks(range(len(ys)), [_label(v) for v in ys])
        ax.set_xlabel(px)
        if ax.get_subplotspec().is_first_col():
            ax.set_ylabel(py)
        if others:
            ax.set_title(_combo_label(others, json.loads(fkey), "\n"), fontsize="small")
        if not annotate:
            continue
        for j in range(len(ys)):
            for i in range(len(xs)):
                v = grid[j, i]
                if np.isfinite(v):
                    light = float(norm(v)) > 0.5 if finite.max() > finite.min() else False
                    ax.text(i, j, fmt(v), ha="center", va="center", fontsize="small",
                            color="black" if light else "white")
    for ax in axs[n:]:
        ax.set_visible(False)
    title = f"{clabel}: mean over seeds"  # the cells' unit: a time is not in ns
    if n == 1:
        axs[0].set_title(title)
    else:
        fig.suptitle(title)
    cb = fig.colorbar(im, ax=list(axs[:n]), label=clabel)
    if not isinstance(norm, LogNorm):
        _plain_y(cb.ax)
    return fig


def heatmap(rows: list[dict], px: str, py: str, metric: str,
            others: list[str] = ()) -> bytes | None:
    fig = heatmap_figure(rows, px, py, metric, others)
    return None if fig is None else _png(fig)


def fmt(v) -> str:
    """A compact number for tables and cells."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, bool) or not _is_num(v):
        return _label(v)
    if isinstance(v, int) or float(v).is_integer() and abs(v) >= 1000:
        return f"{int(v):,}"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a == 0:
        return "0"
    if a < 1e-3:
        return f"{v:.2e}"
    return f"{v:.4g}"


def axes(rows: list[dict], param_paths: list[str]) -> dict[str, list[str]]:
    """The varying parameters that are plotted, each with those that move in lockstep
    with it (zipped lists): a parameter one-to-one with an earlier one is not an axis."""
    out: dict[str, list[str]] = {}
    for p in varying(rows, param_paths):
        for q in out:
            pairs = {(_key(r.get(q)), _key(r.get(p))) for r in rows}
            if len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}):
                out[q].append(p)
                break
        else:
            out[p] = []
    return out


def _crossed(rows: list[dict], a: str, b: str) -> bool:
    """Do a and b vary independently somewhere (a grid, not a diagonal)?"""
    pairs = {(_key(r.get(a)), _key(r.get(b))) for r in rows}
    return len(pairs) > max(len({x for x, _ in pairs}), len({y for _, y in pairs}))


def make_plots(rows: list[dict], param_paths: list[str], metrics: list[str],
               skipped: list[str] | None = None) -> list[Plot]:
    """The line plots and heatmaps; what is left out (a metric that is zero or missing in
    every run, a line plot needing too many facets) is appended to ``skipped``."""
    ax_of = axes(rows, param_paths)
    vary = list(ax_of)
    skipped = [] if skipped is None else skipped
    plots = []
    empty = [m for m in metrics if not has_data(rows, m)]
    if empty and vary:
        skipped.append(f"{', '.join(empty)}: zero or no value in every run")
    for metric in metrics:
        if metric in empty:
            continue
        for p in vary:
            others = [o for o in vary if o != p]
            png = line_plot(rows, p, metric, others, ax_of[p])
            if png is None:
                skipped.append(f"{metric} vs {p}: more than {MAX_PANELS} combinations of "
                               "the other parameters")
                continue
            plots.append(Plot("line", _stem(f"{metric}_vs_{p}"), f"{metric} vs {p}", metric,
                              (p,), png))
    pairs = [(a, b) for i, a in enumerate(vary) for b in vary[i + 1:]
             if _crossed(rows, a, b)][:MAX_PAIRS]
    for metric in metrics:
        if metric in empty:
            continue
        for a, b in pairs:
            png = heatmap(rows, a, b, metric, [o for o in vary if o not in (a, b)])
            if png is None:
                skipped.append(f"{metric} over {a} and {b}: zero in every cell, or more "
                               f"than {MAX_PANELS} combinations of the other parameters")
                continue
            plots.append(Plot("heatmap", _stem(f"{metric}_heatmap_{a}_{b}"),
                              f"{metric} over {a} and {b}", metric, (a, b), png))
    return plots


def _stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def write_plots(out: Path, rows: list[dict], param_paths: list[str],
                metrics: list[str], skipped: list[str] | None = None) -> list[Path]:
    """Write the plots' PNGs; what is not plotted, and why, is appended to ``skipped``."""
    paths = []
    for old in (out / store.PLOTS).glob("*.png"):  # from an earlier version of the sweep
        old.unlink()
    for p in make_plots(rows, param_paths, metrics, skipped):
        path = out / store.PLOTS / f"{p.name}.png"
        store.atomic_write(path, p.png)
        paths.append(path)
    return paths
