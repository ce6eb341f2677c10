"""Sweep plots (matplotlib, no pyplot state): a metric against one parameter with 95 % CI
bands, and heatmaps of a metric over two parameters. Figures render to PNG bytes.
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

MAX_SERIES = 6  # more combinations of the other parameters than this: pool them
MAX_PAIRS = 3  # heatmaps for at most this many parameter pairs
MAX_ANNOTATED = 12  # write the value in each heatmap cell up to this many rows/columns


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


def line_plot(rows: list[dict], param: str, metric: str, others: list[str],
              with_: list[str] = ()) -> bytes:
    from matplotlib.figure import Figure

    xs = ordered_values(rows, param)
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(_key([r.get(o) for o in others]), []).append(r)
    pooled = len(groups) > MAX_SERIES
    if pooled:
        groups = {"": rows}
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    pos = _axis(ax, xs, param)
    for gkey, rs in groups.items():
        means, lo, hi = [], [], []
        for x in xs:
            m, ci, _ = mean_ci([r.get(metric) for r in rs if _key(r.get(param)) == _key(x)])
            means.append(m)
            lo.append(m - ci if not math.isnan(ci) else m)
            hi.append(m + ci if not math.isnan(ci) else m)
        if gkey and others:
            vals = json.loads(gkey)
            label = ", ".join(f"{o}={_label(v)}" for o, v in zip(others, vals, strict=True))
        else:
            label = "all runs" if not pooled else "pooled over the other parameters"
        line = ax.plot(pos, means, marker="o", label=label)[0]
        ax.fill_between(pos, lo, hi, alpha=0.2, color=line.get_color(), linewidth=0)
    ax.set_xlabel(param + (f" (with {', '.join(with_)})" if with_ else ""))
    ax.set_ylabel(metric_label(metric))
    ax.set_title(f"{metric} vs {param} (mean, 95% CI band)")
    ax.grid(True, alpha=0.3)
    if len(groups) > 1 or others:
        ax.legend(fontsize="small")
    return _png(fig)


def heatmap(rows: list[dict], px: str, py: str, metric: str) -> bytes:
    import numpy as np
    from matplotlib.figure import Figure

    xs, ys = ordered_values(rows, px), ordered_values(rows, py)
    grid = np.full((len(ys), len(xs)), np.nan)
    for j, y in enumerate(ys):
        for i, x in enumerate(xs):
            vals = [r.get(metric) for r in rows
                    if _key(r.get(px)) == _key(x) and _key(r.get(py)) == _key(y)]
            grid[j, i] = mean_ci(vals)[0]
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.subplots()
    finite = grid[np.isfinite(grid)]
    norm = None
    if finite.size and finite.min() > 0 and finite.max() / finite.min() >= 50:
        from matplotlib.colors import LogNorm  # a skewed metric (latency under overload)

        norm = LogNorm(finite.min(), finite.max())
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", norm=norm)
    ax.set_xticks(range(len(xs)), [_label(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_label(v) for v in ys])
    ax.set_xlabel(px)
    ax.set_ylabel(py)
    ax.set_title(f"{metric}: mean over seeds")
    fig.colorbar(im, ax=ax, label=metric_label(metric))
    if len(xs) <= MAX_ANNOTATED and len(ys) <= MAX_ANNOTATED:
        for j in range(len(ys)):
            for i in range(len(xs)):
                v = grid[j, i]
                if np.isfinite(v):
                    light = float(im.norm(v)) > 0.5 if finite.max() > finite.min() else False
                    ax.text(i, j, fmt(v), ha="center", va="center", fontsize="small",
                            color="black" if light else "white")
    return _png(fig)


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


def make_plots(rows: list[dict], param_paths: list[str], metrics: list[str]) -> list[Plot]:
    ax_of = axes(rows, param_paths)
    vary = list(ax_of)
    plots = []
    for metric in metrics:
        for p in vary:
            others = [o for o in vary if o != p]
            plots.append(Plot("line", _stem(f"{metric}_vs_{p}"), f"{metric} vs {p}", metric,
                              (p,), line_plot(rows, p, metric, others, ax_of[p])))
    pairs = [(a, b) for i, a in enumerate(vary) for b in vary[i + 1:]
             if _crossed(rows, a, b)][:MAX_PAIRS]
    for metric in metrics:
        for a, b in pairs:
            plots.append(Plot("heatmap", _stem(f"{metric}_heatmap_{a}_{b}"),
                              f"{metric} over {a} and {b}", metric, (a, b),
                              heatmap(rows, a, b, metric)))
    return plots


def _stem(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def write_plots(out: Path, rows: list[dict], param_paths: list[str],
                metrics: list[str]) -> list[Path]:
    paths = []
    for old in (out / store.PLOTS).glob("*.png"):  # from an earlier version of the sweep
        old.unlink()
    for p in make_plots(rows, param_paths, metrics):
        path = out / store.PLOTS / f"{p.name}.png"
        store.atomic_write(path, p.png)
        paths.append(path)
    return paths
