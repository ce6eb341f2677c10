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
