"""Sweep plots drawn from a small table built here (no simulation): bands inside each
metric's range, readable units, legends beside the data, no "None" category, no mean over
unrelated parameters, no plot of a metric that is zero everywhere."""

from __future__ import annotations

import itertools
import math
import random

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402

from rxlab.sweep import plots, store  # noqa: E402

QUEUES, RATE, RPS = "nic.queues", "traffic.groups.0.rate.pps", "kernel.rps_cpus"
BACKLOG = "kernel.netdev_max_backlog"
PARAMS = [QUEUES, RATE, RPS]
METRICS = ["latency_p99_ns", "drop_fraction", "delivered_pps", "time_squeeze"]
SEEDS = [1, 2, 3]


def _records(backlogs=(None,)) -> list[dict]:
    """A grid of 3 x 2 x 2 points, three seeds each; rps_cpus is unset in half the points.
    The seeds scatter widely, so a 95 % band around a mean near 0 (or 1) crosses it."""
    rnd = random.Random(7)
    recs = []
    points = list(itertools.product([1, 2, 4], [100_000, 3_000_000], [None, "f"], backlogs))
    for point, (q, rate, rps, backlog) in enumerate(points):
        for rep, seed in enumerate(SEEDS):
            heavy = rate > 1_000_000
            lat = rnd.choice([800.0, 2_000.0, 4_000_000.0 / q]) * (20 if heavy else 1)
            lat *= 1 + (backlog or 0) / 1000
            drop = rnd.choice([0.0, 0.0, 0.9]) if heavy else rnd.choice([0.0, 0.02])
            params = {QUEUES: q, RATE: rate}
            if rps is not None:  # a point that does not set the parameter at all
                params[RPS] = rps
            if backlog is not None:
                params[BACKLOG] = backlog
            recs.append({
                "run_id": f"p{point}s{seed}", "point": point, "seed": seed, "rep": rep,
                "params": params,
                "metrics": {"latency_p99_ns": lat, "drop_fraction": drop,
                            "delivered_pps": rate * (1 - drop) * rnd.uniform(0.97, 1.0),
                            "time_squeeze": 0},
                "wall_s": 0.1, "worker": "w1"})
    return recs


def _fake_sweep(folder):
    """The table above written as a finished sweep's folder (spec and one file a run)."""
    recs = _records()
    for rec in recs:
        store.write_run(folder, rec)
    points = []
    for rec in recs:
        if rec["params"] not in points:
            points.append(rec["params"])
    store.write_spec(folder, {
        "name": "fake", "base": {"name": "default", "duration": 0.01},
        "param_paths": PARAMS, "metrics": METRICS, "points": points, "seeds": SEEDS,
        "runs": [{"run_id": r["run_id"]} for r in recs]})
    return folder


def _draw(monkeypatch, recs: list[dict], params: list[str]):
    """make_plots over the table, with each figure kept (by plot name) instead of a PNG."""
    figs = []

    def keep(fig):
        figs.append(fig)
        return b"png"

    monkeypatch.setattr(plots, "_png", keep)
    rows = store.rows_from_records(recs, params)
    made = plots.make_plots(rows, params, METRICS)
    assert len(made) == len(figs)
    for fig in figs:
        FigureCanvasAgg(fig).draw()
    return rows, {p.name: (p, fig) for p, fig in zip(made, figs, strict=True)}


@pytest.fixture
def drawn(monkeypatch):
    return _draw(monkeypatch, _records(), PARAMS)


def _lines(fig) -> list:
    return [ln for ax in fig.axes for ln in ax.get_lines()]


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    return out


def test_bands_stay_in_the_metric_range(drawn):
    _, figs = drawn
    bounds = {"latency_p99_ns": (0, math.inf), "delivered_pps": (0, math.inf),
              "drop_fraction": (0, 1)}
    checked = 0
    for plot, fig in figs.values():
        if plot.kind != "line":
            continue
        lo, hi = bounds[plot.metric]
        for ax in fig.axes:
            if not ax.get_visible() or not ax.get_lines():
                continue
            bottom, top = ax.get_ylim()
            assert bottom >= lo and top <= hi, (plot.name, bottom, top)
            for band in (c for c in ax.collections if isinstance(c, PolyCollection)):
                ys = [y for path in band.get_paths() for _, y in path.vertices]
                assert min(ys) >= lo and max(ys) <= hi, (plot.name, min(ys), max(ys))
                checked += 1
    assert checked >= 3 * 4  # bands of three metrics, four lines each


def test_latency_and_rate_units_are_readable(drawn):
    rows, figs = drawn
    lat, _ = figs["latency_p99_ns_vs_nic.queues"][1], None
    ax = lat.axes[0]
    assert "(ms)" in ax.get_ylabel()
    top_ns = max(r["latency_p99_ns"] for r in rows)
    assert max(max(ln.get_ydata()) for ln in ax.get_lines()) < top_ns / 1e5  # drawn in ms
    rate = figs["delivered_pps_vs_nic.queues"][1].axes[0]
    assert "Mpps" in rate.get_ylabel()
    for fig in (lat, figs["delivered_pps_vs_nic.queues"][1]):
        ax = fig.axes[0]
        assert ax.yaxis.get_offset_text().get_text() == ""  # no "1e6" above the axis
        assert not any("e+" in t.get_text() or "e6" in t.get_text()
                       for t in ax.get_yticklabels())


def test_legends_are_outside_the_data(drawn):
    _, figs = drawn
    seen = 0
    for plot, fig in figs.values():
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        renderer = fig.canvas.get_renderer()
        for leg in legends:
            box = leg.get_window_extent(renderer)
            for ax in fig.axes:
                if ax.get_visible() and ax.get_lines():
                    assert not box.overlaps(ax.get_window_extent(renderer)), plot.name
            seen += 1
    assert seen >= 3 * 3  # the line plots of three metrics over three parameters


def test_no_none_category(drawn):
    _, figs = drawn
    labels = []
    for plot, fig in figs.values():
        texts = _texts(fig)
        assert not any("None" in t for t in texts), (plot.name, [t for t in texts if "None" in t])
        labels += texts
    assert any("unset" in t for t in labels)  # the unset runs are there, named for what they are


def test_one_line_per_combination_of_the_other_parameters(drawn):
    rows, figs = drawn
    fig = figs["latency_p99_ns_vs_nic.queues"][1]
    lines = _lines(fig)
    combos = {(r[RATE], r[RPS]) for r in rows}
    assert len(lines) == len(combos) == 4
    # each point of each line is the mean over the seeds of one parameter point only
    expected = set()
    for rate, rps in combos:
        means = []
        for q in (1, 2, 4):
            vals = [r["latency_p99_ns"] for r in rows
                    if (r[QUEUES], r[RATE], r[RPS]) == (q, rate, rps)]
            assert len(vals) == len(SEEDS)
            means.append(sum(vals) / len(vals))
        expected.add(tuple(means))
    scale = {tuple(round(m / 1e6, 6) for m in e) for e in expected}  # drawn in ms
    got = {tuple(round(float(y), 6) for y in ln.get_ydata()) for ln in lines}
    assert got == scale


def test_many_combinations_are_panels_not_a_pooled_mean(monkeypatch):
    params = [*PARAMS, BACKLOG]
    rows, figs = _draw(monkeypatch, _records(backlogs=(300, 1000)), params)
    fig = figs["latency_p99_ns_vs_nic.queues"][1]
    others = [RATE, RPS, BACKLOG]
    combos = {tuple(r[o] for o in others) for r in rows}
    assert len(combos) > plots.MAX_SERIES  # too many for one panel
    lines = _lines(fig)
    assert len(lines) == len(combos)
    expected = set()
    for combo in combos:
        means = []
        for q in (1, 2, 4):
            vals = [r["latency_p99_ns"] for r in rows
                    if r[QUEUES] == q and tuple(r[o] for o in others) == combo]
            means.append(round(sum(vals) / len(vals) / 1e6, 6))
        expected.add(tuple(means))
    assert {tuple(round(float(y), 6) for y in ln.get_ydata()) for ln in lines} == expected


def test_heatmaps_do_not_pool_the_third_parameter(drawn):
    rows, figs = drawn
    heat = [(p, f) for p, f in figs.values() if p.kind == "heatmap"]
    assert heat
    for plot, fig in heat:
        (rest,) = [p for p in PARAMS if p not in plot.params]
        images = [im for ax in fig.axes for im in ax.get_images() if isinstance(im, AxesImage)]
        # one panel per value of the parameter left over
        assert len(images) == len({r[rest] for r in rows}), plot.name


def test_a_metric_zero_everywhere_is_not_drawn(drawn, tmp_path):
    _, figs = drawn
    assert not [n for n in figs if n.startswith("time_squeeze")]
    assert [n for n in figs if n.startswith("drop_fraction")]

    from rxlab.sweep.report import build_report

    html = build_report(_fake_sweep(tmp_path))
    assert 'id="plots-skipped"' in html
    skipped = html.split('id="plots-skipped"')[1].split("</p>")[0]
    assert "time_squeeze" in skipped and "drop_fraction" not in skipped


def test_report_tables_carry_units_by_magnitude(tmp_path):
    """The HTML summary and run tables write latency, rates and shares in the unit their
    magnitude asks for (as the terminal table does), not raw ns, pps and fractions."""
    from rxlab.sweep.report import build_report

    html = build_report(_fake_sweep(tmp_path))
    summary = html.split('id="summary-table"')[1].split("</table>")[0]
    runs = html.split('id="runs-table"')[1].split("</table>")[0]
    for table in (summary, runs):
        assert " ms" in table and " us" in table  # latencies from 800 ns to 80 ms
        assert "Mpps" in table and "Kpps" in table
        assert " %" in table  # drop_fraction as a percentage
        assert "80,000,000" not in table and "2,400,000" not in table
