"""Tables fit the terminal and never cut a number; units follow the magnitude."""

from __future__ import annotations

import io
import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from rxlab.report.fit import fmt_metric, fmt_rate, fmt_time_ns, print_fitted

_num = st.one_of(st.integers(-10**12, 10**12).map(lambda n: f"{n:,}"),
                 st.floats(-1e9, 1e9, allow_nan=False).map(lambda x: f"{x:.3f}"))
_header = st.text("abcdefgh_ %", min_size=1, max_size=24).filter(lambda h: h.strip())


def _render(width: int, headers, rows, keys=1) -> str:
    buf = io.StringIO()
    print_fitted(Console(file=buf, width=width, color_system=None), "t", headers, rows,
                 keys=keys)
    return buf.getvalue()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(40, 200), st.integers(1, 14).flatmap(
    lambda n: st.tuples(st.lists(_header, min_size=n, max_size=n),
                        st.lists(st.lists(_num, min_size=n, max_size=n), min_size=1,
                                 max_size=4))))
def test_every_line_fits_and_every_number_is_whole(width, table):
    headers, rows = table
    rows = [[f"k{i}", *r[1:]] for i, r in enumerate(rows)]
    out = _render(width, headers, rows)
    assert all(len(line) <= width for line in out.splitlines()), out
    cells = re.findall(r"-?[\d,]+(?:\.\d+)?", out)
    for r in rows:
        for v in r[1:]:
            assert v in cells, (v, out)  # the number stands whole in one cell


def test_result_tables_fit_80_columns(capsys):
    from rxlab.report.tables import print_result
    from rxlab.simulate import simulate

    d = json.loads(simulate("default", duration=0.002).to_json())
    buf = io.StringIO()
    print_result(d, Console(file=buf, width=80, color_system=None))
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 80
    assert "flow_limit_count" in buf.getvalue()  # a column moved to a second part


def test_units_by_magnitude():
    assert fmt_time_ns(850) == "850 ns"
    assert fmt_time_ns(12_345) == "12.3 us"
    assert fmt_time_ns(4_560_000) == "4.56 ms"
    assert fmt_rate(1_640_000) == "1.64 Mpps"
    assert fmt_rate(950) == "950 pps"
    assert fmt_metric("latency_ns.p99", 2.5e6) == "2.5 ms"
    assert fmt_metric("cpus.0.util.idle", 0.3) == "30.0 %"
    assert fmt_metric("throughput.delivered_pps", 3e6) == "3 Mpps"
    assert fmt_metric("packets.dropped", 31840) == "31,840"


def test_a_pipe_takes_columns_from_the_environment_else_80(monkeypatch):
    from rxlab.report.tables import console_width, make_console

    monkeypatch.setattr("sys.stdout", io.StringIO())  # not a terminal
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console_width() == 80 and make_console().width == 80
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console().width == 100
    monkeypatch.setenv("COLUMNS", "7")
    assert console_width() == 40  # no table holds a key and a value in fewer
    monkeypatch.setenv("COLUMNS", "wide")
    assert console_width() == 80


def test_a_pipe_gets_ascii_tables_whose_bytes_are_their_columns(monkeypatch):
    from rxlab.report.tables import make_console, plus_minus

    buf = io.StringIO()
    monkeypatch.setattr("sys.stdout", buf)
    monkeypatch.setenv("COLUMNS", "60")
    con = make_console(file=buf)
    print_fitted(con, "t", ["key", "value"], [["a", "1,234"]])
    assert buf.getvalue().isascii() and plus_minus(con) == "+-"
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 60


def test_print_wrapped_indents_its_later_lines_and_keeps_long_words():
    from rxlab.report.fit import print_wrapped

    buf = io.StringIO()
    con = Console(file=buf, width=40, color_system=None)
    path = "drivers/net/ethernet/mellanox/mlx5/core/en_arfs.c"
    print_wrapped(con, f"one two three four five six seven eight {path} nine", "  add   ")
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("  add   one") and all(x.startswith(" " * 8) for x in lines[1:])
    assert any(path in x for x in lines)  # a path longer than the line stays whole
    assert all(len(x) <= 40 for x in lines if path not in x)


def test_explain_arfs_cuts_no_cell_at_80_columns():
    import os
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", "explain", "arfs", "--flows",
                        "16384", "--rps-flow-cnt", "512", "--queues", "144"],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout and "hash_32(hash, log)" in p.stdout
    assert "rps_flow_cnt" in p.stdout
    assert max(len(line.encode()) for line in p.stdout.splitlines()) <= 80


def test_kernel_check_table_fits_the_pipe_and_keeps_words_whole(monkeypatch, capsys):
    from rxlab.cli.kcheck_cmd import print_table

    monkeypatch.setenv("COLUMNS", "80")
    rep = {"checks": [
        {"name": "rps_spread", "status": "ran", "agree": True, "criteria": [
            {"what": "packets per CPU after RPS to CPUs 1-3", "ok": True,
             "kernel": [123456, 234567, 345678, 456789, 567890, 678901, 789012],
             "model": [123450, 234560, 345670, 456780, 567890, 678900, 789010]}]},
        {"name": "flow_limit", "status": "skipped", "agree": None,
         "reason": "kernel built without CONFIG_NET_FLOW_LIMIT"}], "seconds": 12.3}
    print_table(rep)
    out = capsys.readouterr().out
    assert max(len(line.encode()) for line in out.splitlines()) <= 80
    for word in ("CONFIG_NET_FLOW_LIMIT", "123456,", "789012]", "789010]"):
        assert word in out, word


def test_claims_wrap_under_their_text():
    from rxlab.report.tables import print_claims

    exp = {"seeds": 5, "claims": [{
        "held": False, "basis": "predicted", "calibrated_from": None,
        "claim": "with flow_limit the server processes its complete load (>= 97 % of the "
                 "baseline's served requests per second)",
        "figures": [{"figure": "served with flow_limit / baseline", "held": False,
                     "op": ">=", "bound": 0.97, "mean": 0.5, "ci95": [0.49, 0.51]}]}]}
    buf = io.StringIO()
    print_claims(exp, Console(file=buf, width=60, color_system=None))
    lines = buf.getvalue().splitlines()
    head = next(i for i, x in enumerate(lines) if "NOT held" in x)
    assert all(len(x) <= 60 for x in lines)
    assert all(x.startswith(" " * 14) for x in lines[head + 1:]), lines  # none at column 0


def test_a_wide_key_is_numbered_with_a_legend_rather_than_repeated_in_every_part():
    keys = [f"udp 10.207.252.{i}:25154 -> 192.168.0.10:11211" for i in range(5)]
    headers = ["flow", "share", "of all", "packets", "not delivered", "RSS bucket", "queue",
               "IRQ CPU", "backlog CPU", "socket", "thread CPU"]
    rows = [[k, "89.4%", "20.8%", "6,219", "1,510", "66", "2", "2", "2", "0", "0"]
            for k in keys]
    out = _render(80, headers, rows)
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert out.count("(1/") == 1 and "(3/" not in out  # two parts, not four
    for i, k in enumerate(keys):
        assert f"#{i + 1} {k}" in out  # the legend holds each key whole, once
        assert out.count(k) == 1
    narrow = _render(200, headers, rows)
    assert "#1" not in narrow and keys[0] in narrow  # nothing to save: keys as they are


def test_run_at_120_columns_keeps_its_cpu_table_whole():
    """A counter's name may break after an underscore when only that saves a part: at 120
    columns flow_limit_count no longer stands alone in a second part."""
    from rxlab.report.tables import print_result
    from rxlab.simulate import simulate

    d = json.loads(simulate("default", duration=0.002).to_json())
    buf = io.StringIO()
    print_result(d, Console(file=buf, width=120, color_system=None))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "(2/2)" not in out and "flow_" in out and "count" in out
    assert "ring_full" in out  # a table with room keeps its names whole
