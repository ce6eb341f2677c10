"""Seed 000's whole table beside the model's (``rxlab reproduce arfs-flow-match``).

The seed's figures are read from the posting itself ("RE: [Intel-wired-lan] [PATCH v2
net] net: ice: Perform accurate aRFS flow match", 12 June 2025; a copy of its text in
``shared/seeds/000_*.txt`` beside the project, the test skips without it), parsed here
with this test's own reading of the table, never typed in: the reproduction's quoted
table must be the posting's, and the printed and JSON tables must carry its values and
ratios computed right.
"""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from rxlab.cli.main import main
from rxlab.report.seed_table import NOT_MODELLED, print_seed_table
from rxlab.repro import arfs_flow_match as exp_mod

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT.parent / "shared" / "seeds").glob("000_*.txt"))
ROWS = ("Ratio of Pkts on Good:Bad q's", "Avoid wrong aRFS programming", "CPU User",
        "CPU System", "CPU Softirq", "CPU Total", "aRFS Update", "aRFS Skip")
COUNT_ROWS = {"Avoid wrong aRFS programming", "aRFS Update", "aRFS Skip"}


def _value(cell: str) -> float:
    m = re.fullmatch(r"([\d.]+)([KM]?)", cell.strip())
    assert m, cell
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6}[m.group(2)]


def posted() -> tuple[dict, float]:
    """The post's runtime table {row: {size: (original, patched)}} and the run length."""
    if not SEEDS:
        pytest.skip(f"no copy of the seed posting ({ROOT.parent}/shared/seeds/000_*.txt)")
    text = SEEDS[0].read_text()
    secs = float(re.search(r"netperf sessions for (\d+)\s*s", text).group(1))
    sizes, rows = None, {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if not cells:
            continue
        if cells[0] == "rps_flow_cnt":
            sizes = [int(c) for c in cells[1:]]
        elif sizes and cells[0] in ROWS:
            rows[cells[0]] = {n: tuple(_value(x) for x in c.split("vs"))
                              for n, c in zip(sizes, cells[1:], strict=True)}
    assert set(rows) == set(ROWS) and sizes == [512, 2048]
    return rows, secs


@pytest.fixture(scope="module")
def table():
    """One --quick run with 2 traffic seeds, through the CLI's --json."""
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["reproduce", "arfs-flow-match", "--quick", "--json", "--seeds", "2"]) == 0
    # strict JSON: no NaN/Infinity anywhere
    return json.loads(buf.getvalue(), parse_constant=lambda c: pytest.fail(c))


def test_the_quoted_table_is_the_posting():
    rows, secs = posted()
    assert exp_mod.POSTED_DURATION_S == secs
    mine = exp_mod.parse_posted(exp_mod.POSTED)
    assert mine == rows


def test_json_has_every_row_size_and_variant_with_the_posts_values(table):
    rows, secs = posted()
    st = table["seed_table"]
    assert [r["posted_as"] for r in st["rows"]] == list(ROWS)
    for r in st["rows"]:
        for n in (512, 2048):
            cell = r["rps_flow_cnt"][str(n)]
            orig, patched = rows[r["posted_as"]][n]
            scale = secs if r["posted_as"] in COUNT_ROWS else 1.0
            assert cell["seed"]["original"] == pytest.approx(orig / scale, rel=1e-6)
            assert cell["seed"]["patched"] == pytest.approx(patched / scale, rel=1e-6)
            po = cell["seed"]["patched_over_original"]
            assert po is None if orig == 0 else po == pytest.approx(patched / orig, rel=1e-6)
            assert r["modelled"]
            for v in ("original", "patched", "patched_over_original"):
                stat = cell["model"][v]
                if stat is not None:
                    lo, hi = stat["ci95"]
                    assert lo <= stat["mean"] <= hi
        s = r["512_over_2048"]["seed"]
        for i, v in enumerate(("original", "patched")):
            small, large = rows[r["posted_as"]][512][i], rows[r["posted_as"]][2048][i]
            assert s[v] is None if large == 0 else s[v] == pytest.approx(small / large,
                                                                         rel=1e-6)


def _per_seed(table, case, f):
    c = next(c for c in table["cases"] if c["name"] == case)
    return [f(r["metrics"]) for r in c["runs"]]


def test_model_ratios_are_per_seed_means_of_the_runs(table):
    """good:bad is the seed's measure (queues 0-71 : 72-143); counts are per second of
    the model's run; ratios are taken per traffic seed and then averaged."""
    st = {r["posted_as"]: r for r in table["seed_table"]["rows"]}

    def good_bad(m):
        return m["packets_q0_71"] / m["packets_q72_143"]

    for n in (512, 2048):
        o = _per_seed(table, f"hash-match/{n}", good_bad)
        p = _per_seed(table, f"tuple-match/{n}", good_bad)
        got = st["Ratio of Pkts on Good:Bad q's"]["rps_flow_cnt"][str(n)]["model"]
        assert got["original"]["mean"] == pytest.approx(sum(o) / len(o), rel=1e-5)
        assert got["patched_over_original"]["mean"] == pytest.approx(
            sum(b / a for a, b in zip(o, p, strict=True)) / len(o), rel=1e-5)
        skip = _per_seed(table, f"hash-match/{n}", lambda m: m["arfs_skip"] / m["duration_s"])
        assert st["aRFS Skip"]["rps_flow_cnt"][str(n)]["model"]["original"]["mean"] == \
            pytest.approx(sum(skip) / len(skip), rel=1e-5)
        cpu = _per_seed(table, f"tuple-match/{n}", lambda m: m["cpu_system"])
        # the seed's unit: per-CPU percent summed over the 144 CPUs
        assert st["CPU System"]["rps_flow_cnt"][str(n)]["model"]["patched"]["mean"] == \
            pytest.approx(100 * 144 * sum(cpu) / len(cpu), rel=1e-5)
    upd = [a / b for a, b in zip(
        _per_seed(table, "hash-match/512", lambda m: m["arfs_update"]),
        _per_seed(table, "hash-match/2048", lambda m: m["arfs_update"]), strict=True)]
    got = st["aRFS Update"]["512_over_2048"]["model"]["original"]
    assert got["mean"] == pytest.approx(sum(upd) / len(upd), rel=1e-5)


def _render(seed_table) -> str:
    buf = io.StringIO()
    print_seed_table(seed_table, Console(file=buf, width=140, color_system=None))
    return buf.getvalue()


def test_printed_table_fits_80_columns_and_has_every_row(table):
    out = _render(table["seed_table"])
    assert max(len(line) for line in out.splitlines()) <= 80, out
    for r in table["seed_table"]["rows"]:
        # twice per size table and once in the 512/2048 table
        assert len(re.findall(rf"│ {re.escape(r['row'])}\s+│", out)) == 3, r["row"]
    assert "rps_flow_cnt 512" in out and "rps_flow_cnt 2048" in out
    assert out.count("│   model") == 3 * len(ROWS)
    # the reproduction's own printout (cases, then the seed's table) on an 80-column tty
    from rxlab.report.tables import print_experiment

    buf = io.StringIO()
    print_experiment(table, Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("│   model") == 3 * len(ROWS)


def test_a_row_the_model_lacks_prints_not_modelled(table):
    exp = copy.deepcopy(table)
    for c in exp["cases"]:
        for r in c["runs"]:
            del r["metrics"]["cpu_user"]
    st = exp_mod.seed_table(exp)
    row = next(r for r in st["rows"] if r["posted_as"] == "CPU User")
    assert not row["modelled"] and row["rps_flow_cnt"]["512"]["model"] is None
    assert row["rps_flow_cnt"]["512"]["seed"]["original"] == posted()[0]["CPU User"][512][0]
    assert _render(st).count(NOT_MODELLED) == 3


def test_the_kernel_decision_is_the_default(table):
    """docs/model.md states which kernel the seed ran; the reproduction runs it by
    default and the other flow_id rule is one --kernel away."""
    doc = (ROOT / "docs" / "model.md").read_text()
    sec = doc.split("## Which kernel seed 000 ran", 1)[1].split("\n## ", 1)[0]
    decided = re.search(r"Decision: `--kernel ([\d.]+)`", sec).group(1)
    other = re.search(r"other rule: `--kernel ([\d.]+)`", sec).group(1)
    assert decided == exp_mod.KERNEL
    assert table["kernels"] == [exp_mod.KERNEL]
    assert table["seed_table"]["kernels"] == [exp_mod.KERNEL]
    hash32 = {k: tuple(map(int, k.split("."))) >= (6, 15) for k in (decided, other)}
    assert hash32[decided] != hash32[other]
    assert {sc.host.kernel for _, _, sc in exp_mod.cases(True, other)} == {other}


def test_budget_seed_side_is_the_postings_arithmetic(table):
    """What the seed's saving would need, from the posting's own rows: CPUs saved over
    the aRFS updates and skips the patch removed (per second of its 180 s), and the
    saving per unit of user (netperf) time; beside the profile's per-event costs."""
    from rxlab.profiles import load_profile

    rows, secs = posted()
    b = table["seed_table"]["budget"]
    stages = load_profile(b["profile"])["stages"]
    packet = sum(float(stages[k]["ns"]) for k in ("tcp_remote", "wakeup_remote", "arfs_steer"))
    assert b["profile_packet_ns"] == pytest.approx(packet)
    assert b["profile_update_ns"] == pytest.approx(packet + float(stages["arfs_program"]["ns"]))
    for n in (512, 2048):
        s = b["rps_flow_cnt"][str(n)]["seed"]
        (to, tp), (uo, up) = rows["CPU Total"][n], rows["CPU User"][n]
        calls = (rows["aRFS Update"][n][0] - rows["aRFS Update"][n][1]
                 + rows["aRFS Skip"][n][0] - rows["aRFS Skip"][n][1]) / secs
        assert s["cpu_saved_cpus"] == pytest.approx(to - tp, rel=1e-4)
        assert s["steer_calls_removed_per_s"] == pytest.approx(calls, rel=1e-4)
        assert s["cost_per_removed_call_ns"] == pytest.approx(1e9 * (to - tp) / calls, rel=1e-4)
        assert s["times_profile_update_cost"] == pytest.approx(
            1e9 * (to - tp) / calls / b["profile_update_ns"], rel=1e-3)
        assert s["user_ratio"] == pytest.approx(up / uo, rel=1e-4)
        assert s["saving_per_user_time_pct"] == pytest.approx(
            100 * (1 - (tp / up) / (to / uo)), rel=1e-3)
    # the posting's saving cannot come from per-event costs of the profile's size: every
    # removed call would have to cost over 10x the dearest event (an update)
    assert all(b["rps_flow_cnt"][n]["seed"]["times_profile_update_cost"] > 10
               for n in ("512", "2048"))


def test_budget_model_side_is_per_seed_means_of_the_runs(table):
    """CPUs the model is short of half the seed's saving, and what it would have to charge
    each packet the patch keeps off another CPU than its reader, per traffic seed."""
    b = table["seed_table"]["budget"]
    for n in (512, 2048):
        m = b["rps_flow_cnt"][str(n)]["model"]
        target = exp_mod.HALF_SAVING[n] / 100
        o = _per_seed(table, f"hash-match/{n}", lambda r: (144 * r["cpu_total"],
                                                            r["tcp_away"], r["duration_s"]))
        p = _per_seed(table, f"tuple-match/{n}", lambda r: (144 * r["cpu_total"],
                                                             r["tcp_away"]))
        missing = [target * a[0] - (a[0] - c[0]) for a, c in zip(o, p, strict=True)]
        away = [(a[1] - c[1]) / a[2] for a, c in zip(o, p, strict=True)]
        assert m["missing_cpus"]["mean"] == pytest.approx(sum(missing) / len(missing),
                                                          rel=1e-4, abs=1e-6)
        assert m["away_packets_removed_per_s"]["mean"] == pytest.approx(
            sum(away) / len(away), rel=1e-4, abs=1e-6)
        if all(x > 0 for x in away):
            need = [1e9 * x / y for x, y in zip(missing, away, strict=True)]
            assert m["extra_cost_per_away_packet_ns"]["mean"] == pytest.approx(
                sum(need) / len(need), rel=1e-4)
    assert "What the seed's CPU saving would need" in _render(table["seed_table"])
