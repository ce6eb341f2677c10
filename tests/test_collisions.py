"""aRFS flow_id collisions (``set_rps_cpu`` in net/core/dev.c, ``ice_rx_flow_steer`` in
drivers/net/ethernet/intel/ice/ice_arfs.c): the birthday model against exact
counts, and ``rxlab explain arfs``.

Two flows fight over one filter in the original ice driver when they agree on the
bucket (raw hash & 1023) and on flow_id (their slot in the target queue's table of S
entries). The reference key below is written from the kernel: flow_id = hash & (S-1)
up to v6.14, hash_32(hash, log2 S) since v6.15. Pair probability p:

* hash & (S-1) with hash & 1023: nested low-bit masks, so the pair collides iff the low
  max(10, log2 S) bits agree: p = 1 / max(1024, S);
* hash_32 with hash & 1023: for a uniform u32 hash the low 10 bits and the top log2 S
  bits of hash * 0x61C88647 (odd, a bijection that keeps the low 10 bits' class) are
  independent for log2 S <= 22: p = 1 / (1024 S).

The number of colliding pairs among N uniform hashes has mean C(N, 2) p and, the pair
indicators being pairwise independent, variance C(N, 2) p (1 - p) (about Poisson).
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rfs_reference import ref_hash_32

from rxlab.nic.collisions import birthday, observed, pair_probability


def ref_key(h: int, size: int, hash32: bool) -> tuple[int, int]:
    log = size.bit_length() - 1
    fid = ref_hash_32(h, log) if hash32 else h & (size - 1)
    return (h & 1023, fid)


def ref_counts(hashes, size, hash32):
    c = Counter(ref_key(int(h), size, hash32) for h in hashes)
    pairs = sum(n * (n - 1) // 2 for n in c.values())
    flows = sum(n for n in c.values() if n > 1)
    return pairs, flows


def ref_p(size: int, hash32: bool) -> float:
    return 1.0 / (1024 * size) if hash32 else 1.0 / max(1024, size)


def ref_mean_sd(n: int, size: int, hash32: bool) -> tuple[float, float]:
    p = ref_p(size, hash32)
    mu = n * (n - 1) / 2 * p
    return mu, math.sqrt(mu * (1 - p))


# ------------------------------------------------------------- the model itself ----
@pytest.mark.parametrize("hash32", [True, False])
@pytest.mark.parametrize("size", [2, 64, 512, 1024, 2048, 65536])
def test_pair_probability_and_birthday(size, hash32):
    assert pair_probability(size, hash32) == pytest.approx(ref_p(size, hash32), rel=1e-12)
    n = 16_384
    b = birthday(n, size, hash32)
    p = ref_p(size, hash32)
    assert b["pairs"] == pytest.approx(n * (n - 1) / 2 * p, rel=1e-12)
    assert b["flows_colliding"] == pytest.approx(n * (1 - (1 - p) ** (n - 1)), rel=1e-9)
    assert b["pairs_sd"] == pytest.approx(math.sqrt(b["pairs"]), rel=0.01)


def test_seed_table_sizes():
    """The seed's 16K flows: 512 vs 2048 entries under each flow_id rule."""
    assert birthday(16_384, 512, True)["pairs"] == pytest.approx(255.98, abs=0.01)
    assert birthday(16_384, 2048, True)["pairs"] == pytest.approx(64.0, abs=0.01)
    assert birthday(16_384, 512, False)["pairs"] == pytest.approx(131_064.0, abs=0.1)
    assert birthday(16_384, 2048, False)["pairs"] == pytest.approx(65_532.0, abs=0.1)


# ------------------------------------------------------ exact counts for hashes -----
@settings(max_examples=300, deadline=None)
@given(hashes=st.lists(st.one_of(st.integers(0, 0xFFFFFFFF),
                                 st.integers(0, 40).map(lambda k: 0x1234 + (k << 10))),
                       max_size=60),
       log=st.integers(1, 16), hash32=st.booleans())
def test_observed_is_exact(hashes, log, hash32):
    size = 1 << log
    got = observed(np.array(hashes, dtype=np.int64), size, hash32)
    pairs, flows = ref_counts(hashes, size, hash32)
    assert (got["pairs"], got["flows_colliding"]) == (pairs, flows)


# --------------------------------------------------- random hashes vs the model -----
CASES = [  # (flows, table size): mean pairs from ~2 to ~131000 depending on the rule
    (2_000, 64), (2_000, 1024), (4_000, 4096), (16_384, 512), (16_384, 2048),
    (50_000, 65536),
]


@pytest.mark.parametrize("hash32", [True, False])
@pytest.mark.parametrize("n,size", CASES)
def test_observed_agrees_with_birthday_on_random_hashes(n, size, hash32):
    rng = np.random.default_rng(1000 * size + n + hash32)
    mu, sd = ref_mean_sd(n, size, hash32)
    model = birthday(n, size, hash32)
    assert model["pairs"] == pytest.approx(mu, rel=1e-12)
    trials = 30
    pairs, flows = [], []
    for _ in range(trials):
        h = rng.integers(0, 1 << 32, n, dtype=np.int64)
        o = observed(h, size, hash32)
        pairs.append(o["pairs"])
        flows.append(o["flows_colliding"])
        assert abs(o["pairs"] - mu) <= 4 * sd + 1, (o["pairs"], mu, sd)  # each draw
    # the mean of 30 draws: 4 standard errors
    assert abs(np.mean(pairs) - mu) <= 4 * sd / math.sqrt(trials) + 0.5
    sd_f = np.std(flows, ddof=1) or 1.0
    assert abs(np.mean(flows) - model["flows_colliding"]) <= 4 * sd_f / math.sqrt(trials) + 1


# ------------------------------------------- the reproduction's actual flows -------
@pytest.mark.parametrize("kernel", ["6.14", "6.15"])
@pytest.mark.parametrize("cnt", [512, 2048])
def test_scenario_flows_agree_with_birthday(kernel, cnt):
    """The seed's 16K TCP flows (RSS Toeplitz hashes reported as L4 hashes) counted by
    the reproduction's extra_metrics, against the model: within 4 sd."""
    from rxlab.build import flow_steering
    from rxlab.repro import arfs_flow_match as afm
    from rxlab.repro.base import make
    from rxlab.traffic.flows import build_flows

    sc = make(afm.scenario("ice-hash-match", cnt, 0.1, kernel), afm.NAME)
    got = afm.extra_metrics("x", sc)["collisions_observed"]
    hash32 = kernel != "6.14"
    mu, sd = ref_mean_sd(afm.FLOWS, cnt, hash32)
    assert abs(got - mu) <= 4 * sd, (got, mu, sd)
    # and it is the exact count of the flows' (bucket, flow_id) keys
    fl = build_flows(sc.traffic, sc.seed)
    h = flow_steering(sc, fl)["skb_hash"]
    assert len(h) == afm.FLOWS
    assert got == ref_counts(h, cnt, hash32)[0]


# --------------------------------------------------------- rxlab explain arfs ------
def explain(capsys, *args):
    from rxlab.cli.main import main

    rc = main(["explain", "arfs", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("kernel,hash32,entry", [("6.14", False, 8), ("6.15", True, 8),
                                                 ("6.19", True, 12)])
def test_explain_json_numbers(capsys, kernel, hash32, entry):
    rc, out, err = explain(capsys, "--flows", "16384", "--rps-flow-cnt", "1000",
                           "--queues", "16", "--kernel", kernel, "--json")
    assert rc == 0 and not err
    data = json.loads(out)
    rows = data["tables"]
    assert [r["rps_flow_cnt"] for r in rows] == [1024, 2048, 4096, 8192]  # rounded
    for r in rows:
        mu, _ = ref_mean_sd(16_384, r["rps_flow_cnt"], hash32)
        assert r["colliding_pairs"] == pytest.approx(mu, abs=0.051)
        assert r["flow_id_rule"] == ("hash_32(hash, log)" if hash32 else "hash & (size - 1)")
        # per-queue tables: u16 cpu, u16 filter, u32 last_qtail (+ u32 hash since 6.18)
        assert r["memory_bytes"] >= r["rps_flow_cnt"] * 16 * entry
    pairs = [r["colliding_pairs"] for r in rows]
    assert pairs == sorted(pairs, reverse=True)


def test_explain_table_prints(capsys):
    rc, out, err = explain(capsys, "--flows", "20000", "--rps-flow-cnt", "512",
                           "--queues", "8")
    assert rc == 0 and not err
    assert "512" in out and ("2,048" in out or "2048" in out)


def test_explain_memory_counts_the_rounded_socket_table(capsys):
    rc, out, _ = explain(capsys, "--flows", "16384", "--rps-flow-cnt", "512",
                         "--queues", "144", "--kernel", "6.15", "--json")
    row = json.loads(out)["tables"][0]
    assert row["memory_bytes"] == 512 * 144 * 8 + 4 * 131072


@pytest.mark.parametrize("args", [
    ["--flows", "1", "--rps-flow-cnt", "512", "--queues", "4"],
    ["--flows", "0", "--rps-flow-cnt", "512", "--queues", "4"],
    ["--flows", "-3", "--rps-flow-cnt", "512", "--queues", "4"],
    ["--flows", "100", "--rps-flow-cnt", "1", "--queues", "4"],
    ["--flows", "100", "--rps-flow-cnt", "0", "--queues", "4"],
    ["--flows", "100", "--rps-flow-cnt", "512", "--queues", "0"],
    ["--flows", "lots", "--rps-flow-cnt", "512", "--queues", "4"],
    ["--flows", "100", "--rps-flow-cnt", "5.5", "--queues", "4"],
    ["--flows", "100", "--rps-flow-cnt", "512", "--queues", "-1"],
    ["--flows", "100", "--rps-flow-cnt", "512", "--queues", "4", "--kernel", "banana"],
])
def test_explain_bad_numbers_exit_2_one_line(capsys, args):
    rc, out, err = explain(capsys, *args)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rxlab: error:"), lines
    assert not out


@pytest.mark.parametrize("cnt,kernel", [(str((1 << 32) + 1), "6.19"),
                                        (str((1 << 27) + 1), "7.1")])
def test_explain_rps_flow_cnt_above_kernel_maximum(capsys, cnt, kernel):
    rc, _, err = explain(capsys, "--flows", "100", "--rps-flow-cnt", cnt, "--queues", "4",
                         "--kernel", kernel)
    assert rc == 2 and len(err.strip().splitlines()) == 1
