"""Words and units that are true (issue 34, item 7): a claim about polls says what
happened, a read batching names the protocol's call, a count of 0 delivered says why,
an unreadable file is not printed as a value, a mark of significance never sits beside
a figure that reads 0, and a unit never shows 1000 of itself."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np

from rxlab.compare.table import fmt_interval, fmt_value
from rxlab.explain.common import batched_reads
from rxlab.report.fit import fmt_rate, fmt_time_ns
from rxlab.report.tables import nothing_delivered


def _cli(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", *args], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_a_cpu_saturated_in_softirq_is_not_said_to_empty_its_poll_lists():
    d = json.loads(_cli("explain", "drops", "cpumap", "--duration", "0.005", "--json"))
    text = json.dumps(d)
    assert "emptied its poll list" not in text
    cpu0 = next(r for r in d["softirq_budget"] if r["cpu"] == 0)
    assert cpu0["time_squeeze"] == 0
    assert "no net_rx_action run stopped" in cpu0["why"]
    assert "in ksoftirqd" in cpu0["why"] and "not the budget" in cpu0["why"]


def _subject(protos, socks):
    table = SimpleNamespace(proto=np.array(protos, np.uint8))
    return SimpleNamespace(flows=SimpleNamespace(table=table, sock=np.array(socks)))


def test_recvmmsg_is_named_for_udp_only():
    assert batched_reads(_subject([17, 17], [0, 0]), 0) == "recvmmsg batch"
    assert "recvmmsg" not in batched_reads(_subject([6, 6, 17], [0, 0, 1]), 0)
    assert "TCP" in batched_reads(_subject([6, 17], [0, 0]), 0)
    assert batched_reads(SimpleNamespace(flows=None), 0) == "recvmmsg batch"


def test_delivered_0_says_why():
    pk = {"offered": 10, "delivered": 0, "forwarded": 0,
          "dropped_by_reason": {"ring_full": 3, "no_socket": 7}}
    assert "no socket is bound" in nothing_delivered(pk)
    assert "most for ring_full" in nothing_delivered(
        {**pk, "dropped_by_reason": {"ring_full": 9, "no_socket": 1}})
    assert nothing_delivered({**pk, "delivered": 1}) is None
    assert "delivered 0: no socket" in _cli("run", "cpumap", "--duration", "0.002")


def test_host_show_prints_no_none():
    from rxlab.cli.host_cmd import format_text

    info = {"hostname": "h", "cpus": 2, "cpus_online": "0-1", "kernel": "6.1", "netns": None,
            "sysctls": {}, "notes": [], "unmodelled": {},
            "devices": {"eth0": {"driver": "x", "rx_queues": 1, "tx_queues": 1,
                                 "operstate": "up", "irqs": [], "unmodelled": {},
                                 "rx": [{"queue": 0, "rps_cpus": "0", "rps_flow_cnt": 0}],
                                 "tx": [{"queue": 0, "xps_cpus": None}]}}}
    text = format_text(info)
    assert "None" not in text and "xps_cpus:     unreadable" in text
    assert "None" not in _cli("host", "show")


def test_significance_is_never_marked_beside_a_figure_that_reads_0():
    s = fmt_interval("fraction", {"estimate": 3e-6, "ci95": 0.0, "significant": True},
                     diff=True)
    assert s.startswith("+0.0003 %") and s.endswith("*")
    assert fmt_value("fraction", 0.0) == "0.00 %"
    assert fmt_value("fraction", 0.002) == "0.20 %"


def test_a_unit_never_shows_1000_of_itself():
    assert fmt_rate(999_999.9) == "1 Mpps" and fmt_time_ns(999_999.9) == "1 ms"
    assert fmt_rate(999.7) == "1 Kpps" and fmt_time_ns(3.6e12) == "3,600 s"


def test_sweep_plot_titles_carry_the_unit_of_their_axis():
    import matplotlib

    matplotlib.use("Agg")
    from rxlab.sweep.plots import heatmap_figure, line_figure

    rows = [{"params": {"nic.queues": q, "kernel.rps_cpus": r}, "n": 2,
             "stats": {"latency_p99_ns": (v, 100.0)}, "latency_p99_ns": v}
            for q, r, v in ((1, "0", 2500.0), (2, "0", 3500.0), (1, "f", 2000.0),
                            (2, "f", 2600.0))]
    fig = line_figure(rows, "nic.queues", "latency_p99_ns", ["kernel.rps_cpus"])
    titles = [fig._suptitle.get_text() if fig._suptitle else ""] + [
        ax.get_title() for ax in fig.axes]
    assert any("latency_p99 (us) vs nic.queues" in t for t in titles), titles
    assert not any("latency_p99_ns" in t for t in titles), titles
    fig = heatmap_figure(rows, "nic.queues", "kernel.rps_cpus", "latency_p99_ns")
    assert any("latency_p99 (us): mean over seeds" in ax.get_title() for ax in fig.axes)


def test_run_plots_show_offered_over_delivered_and_keep_the_legend_off_the_bars(
        tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rxlab.report import plots

    figs = []
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    t = [0.0, 0.01, 0.02]
    plots.plot_throughput({"t_s": t, "offered_pps": [1e5] * 3, "delivered_pps": [1e5] * 3,
                           "dropped_pps": [0.0] * 3}, tmp_path / "t.png")
    lines = {ln.get_label(): ln for ln in figs[-1].axes[0].get_lines()}
    assert lines["offered"].get_linestyle() == "--"
    assert lines["offered"].get_zorder() > lines["delivered"].get_zorder()
    d = {"cpus": [{"cpu": c, "util": {"softirq": 1.0, "irq": 0.0, "system": 0.0,
                                      "user": 0.0}} for c in range(4)]}
    plots.plot_cpu_load(d, tmp_path / "c.png")
    fig = figs[-1]
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 <= ax.get_window_extent().y0  # below the axes, not on a full bar


def test_the_ksoftirqd_column_says_it_is_part_of_softirq():
    import io

    from rich.console import Console

    from rxlab.report.tables import print_cpus
    from rxlab.simulate import simulate

    d = json.loads(simulate("default", duration=0.002).to_json())
    buf = io.StringIO()
    print_cpus(d, Console(file=buf, width=200, color_system=None))
    out = buf.getvalue()
    assert "of it in" in out and "ksoftirqd" in out and "idle = 100" in out
    for c in d["cpus"]:
        u = c["util"]
        assert abs(sum(u[k] for k in ("softirq", "irq", "system", "user", "idle")) - 1) < 1e-3
        assert u["ksoftirqd"] <= u["softirq"] + 1e-9


def test_the_compare_page_lets_its_table_headers_wrap():
    from rxlab.compare.render import html_page

    cfg = [{"name": n, "source": "default", "overrides": {}, "kernel": "6.19",
            "duration_s": 0.005, "seeds": [1, 2]} for n in ("default", "a-long-variant-name")]
    cmp = {"configurations": cfg, "baseline": "default", "paired": True, "metrics": []}
    html = html_page(cmp, None)
    assert "#comparison-table th{white-space:normal" in html
