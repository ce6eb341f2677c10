"""Benchmark machinery: the SimPy reference agrees with rxlab, C Toeplitz equals rxlab's,
``rxlab bench --json`` has its keys, Student-t quantiles. No timed assertions: speed
lives in ``rxlab bench`` (docs/performance.md)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rxlab.bench import scenarios, simpy_ref
from rxlab.cli.main import main
from rxlab.nic.toeplitz import MS_RSS_KEY, convert_rss_key, softrss
from rxlab.simulate import simulate
from rxlab.stats import mean_ci95, t_quantile

simpy = pytest.importorskip("simpy")


@pytest.fixture(scope="module")
def reference_pair():
    sc = scenarios.reference(0.01)
    rx = simpy_ref.rxlab_counts(simulate(sc))
    sp = simpy_ref.run_simpy(sc)
    return rx, sp


def test_simpy_model_agrees_with_rxlab(reference_pair):
    rx, sp = reference_pair
    cmp = simpy_ref.compare(rx, sp)
    # identical inputs: the same packets reach both NICs
    assert rx["offered"] == sp["offered"] > 40_000
    # the scenario is meaningful: the backlog limit drops packets in both models
    assert rx["dropped_backlog"] > 0.01 * rx["offered"]
    assert sp["dropped_backlog"] > 0.01 * sp["offered"]
    assert rx["dropped_ring_full"] == sp["dropped_ring_full"] == 0
    # drops within 1 point of offered (or 10 % of the drops), mean latency within 10 %
    assert cmp["agree"], cmp
    # conservation in the SimPy model too (it drains: nothing left in flight)
    assert sp["offered"] == sp["delivered_to_socket"] + sp["dropped"] + sp["in_flight"]
    # RPS spreads the same packets over the same CPUs in both models
    for c in (2, 3):
        assert abs(rx["processed"][c] - sp["processed"][c]) <= 0.01 * rx["offered"]
    assert rx["processed"][:2] == sp["processed"][:2] == [0, 0]


def test_simpy_inputs_are_rxlab_decisions():
    sc = scenarios.reference(0.001)
    inp = simpy_ref.model_inputs(sc)
    from rxlab.build import build

    m = build(sc)
    assert np.array_equal(inp.flow_rxq, m.params.flow["flow_rxq"])
    # every flow goes to one of the RPS CPUs 2-3, chosen by the high bits of its hash
    assert set(np.unique(inp.flow_cpu)) <= {2, 3}
    h = m.params.flow["flow_hash"].astype(np.uint64)
    assert np.array_equal(inp.flow_cpu, 2 + ((h * np.uint64(2)) >> np.uint64(32)).astype(int))
    assert np.all(np.diff(inp.t_nic) >= 0)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_c_toeplitz_equals_rxlab():
    from rxlab.bench.toeplitz_c import CToeplitz

    rng = np.random.default_rng(2024)
    for key in (MS_RSS_KEY, rng.integers(0, 256, 40, dtype=np.uint8).tobytes()):
        data = rng.integers(0, 256, (5000, 12), dtype=np.uint8)
        data[:2] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [255] * 12
        with CToeplitz(key) as c:
            assert np.array_equal(c.hash(data), softrss(convert_rss_key(key), data))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_c_toeplitz_microsoft_vector():
    from rxlab.bench.toeplitz_c import CToeplitz

    # Microsoft RSS verification suite, IPv4 with ports: 66.9.149.187:2794 ->
    # 161.142.100.80:1766 gives 0x51ccc178
    row = np.array([[66, 9, 149, 187, 161, 142, 100, 80, 0x0A, 0xEA, 0x06, 0xE6]], np.uint8)
    with CToeplitz() as c:
        assert int(c.hash(row)[0]) == 0x51CCC178


def test_bench_json_has_the_keys(capsys):
    assert main(["bench", "--json", "--quick", "--skip-arfs"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("engine_pps", "simpy_pps", "ratio_vs_simpy", "toeplitz_hps", "c_toeplitz_hps",
              "toeplitz_ratio_vs_c", "peak_rss_mb", "engine_pps_arfs", "agreement", "machine"):
        assert k in d, k
    for k in ("cpu_model", "numpy", "numba"):
        assert d["machine"][k]
    assert d["engine_pps"] > 0 and d["simpy_pps"] > 0 and d["peak_rss_mb"] > 0
    assert d["ratio_vs_simpy"] == pytest.approx(d["rxlab_pps_reference"] / d["simpy_pps"],
                                                rel=1e-3)
    assert d["ratio_vs_simpy_loop"] == pytest.approx(
        d["rxlab_loop_pps_reference"] / d["simpy_pps"], rel=1e-3)
    stages = d["reference"]["rxlab_stages_ns_per_packet"]
    assert stages["loop_ns"] > 0 and stages["generate_ns"] > 0
    assert d["agreement"]["agree"]
    if d["toeplitz_hps"] is not None:
        assert d["toeplitz_c_equal"]


def test_t_quantile_matches_tables():
    # two-sided 95 % critical values of Student's t
    for df, t in ((1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045), (120, 1.980)):
        assert t_quantile(0.975, df) == pytest.approx(t, abs=1e-3)
    assert t_quantile(0.025, 5) == pytest.approx(-t_quantile(0.975, 5))
    m, h = mean_ci95([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and h == pytest.approx(3.182446 * np.std([1, 2, 3, 4], ddof=1) / 2)
    assert mean_ci95([5.0]) == (5.0, None)
