import ipaddress
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rxlab.traffic import PacketStream, TrafficSpec, build_flows


def group(**kw):
    g = dict(
        name="g",
        flows=10,
        src={"cidr": "10.0.0.0/8"},
        dst={"addr": "192.168.0.1"},
        dport={"value": 9000},
        rate={"pps": 100_000},
    )
    g.update(kw)
    return g


def spec(*groups):
    return TrafficSpec.model_validate({"groups": list(groups) or [group()]})


def stream(sp, seed=1, duration=0.1):
    return PacketStream(sp, build_flows(sp, seed), seed, duration)


def collect(ps, max_packets=1 << 16):
    cs = list(ps.chunks(max_packets))
    if not cs:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
    return tuple(np.concatenate([getattr(c, f) for c in cs]) for f in ("t_ns", "flow", "size"))


MIXED = spec(
    group(
        name="a",
        flows=100,
        rate={"pps": 200_000, "per_flow": "zipf", "zipf_s": 1.2},
        size={"choices": [64, 512, 1518], "weights": [5, 1, 2]},
    ),
    group(name="b", flows=3, arrivals="constant", rate={"pps": 30_000}, start=0.01, stop=0.04),
    group(
        name="c",
        flows=5,
        ip=6,
        src={"cidr": "2001:db8::/64"},
        dst={"addr": "2001:db8::1"},
        arrivals={"process": "onoff", "on_s": 0.002, "off_s": 0.003, "within": "constant"},
        rate={"pps": 1_000_000},
    ),
    group(name="d", spoofed=True, src=None, rate={"pps": 500_000}),
)
MIXED_REF = collect(stream(MIXED, seed=3, duration=0.05), 1 << 30)


# --- stream structure -------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40_000))
def test_chunk_size_does_not_change_stream(max_packets):
    ps = stream(MIXED, seed=3, duration=0.05)
    chunks = list(ps.chunks(max_packets))
    assert all(len(c) == max_packets for c in chunks[:-1]) and 0 < len(chunks[-1]) <= max_packets
    got = collect(ps, max_packets)
    for a, b in zip(got, MIXED_REF, strict=True):
        np.testing.assert_array_equal(a, b)


def test_merged_stream_is_ordered_and_typed():
    t, flow, size = MIXED_REF
    assert t.dtype == np.int64 and flow.dtype == np.int32 and size.dtype == np.int32
    assert np.all(np.diff(t) >= 0) and t[0] >= 0 and t[-1] < 50_000_000
    ft = build_flows(MIXED, 3)
    g = ft.group[flow]
    # Ties in time go by group index.
    same = np.diff(t) == 0
    assert np.all(np.diff(g)[same] >= 0)
    assert set(np.unique(g)) == {0, 1, 2, 3}


def test_deterministic_and_seed_sensitive():
    again = collect(stream(MIXED, seed=3, duration=0.05))
    for a, b in zip(again, MIXED_REF, strict=True):
        np.testing.assert_array_equal(a, b)
    other = collect(stream(MIXED, seed=4, duration=0.05))
    assert other[0].size != MIXED_REF[0].size or not np.array_equal(other[0], MIXED_REF[0])


def test_groups_are_independent_and_duration_only_truncates():
    sp_a = spec(group(name="a", rate={"pps": 300_000}))
    sp_ab = spec(group(name="a", rate={"pps": 300_000}), group(name="b", rate={"pps": 77_000}))
    t1, f1, _ = collect(stream(sp_a, duration=0.2))
    t2, f2, _ = collect(stream(sp_ab, duration=0.2))
    keep = f2 < 10  # group a's rows
    np.testing.assert_array_equal(t1, t2[keep])
    np.testing.assert_array_equal(f1, f2[keep])
    short = collect(stream(sp_a, duration=0.13))
    n = short[0].size
    np.testing.assert_array_equal(short[0], t1[:n])
    assert t1[n] >= 130_000_000 > short[0][-1]


def test_huge_stream_is_lazy():
    sp = spec(group(rate={"pps": 1e9}))
    ps = stream(sp, duration=1.0)
    assert ps.expected_packets() == pytest.approx(1e9)
    first = list(itertools.islice(ps.chunks(10_000), 3))
    assert [len(c) for c in first] == [10_000] * 3


# --- arrival processes ------------------------------------------------------------------


def test_poisson_count_and_interarrivals():
    pps, dur = 1_000_000, 0.5
    ps = stream(spec(group(flows=1000, rate={"pps": pps})), seed=11, duration=dur)
    t, _, _ = collect(ps)
    mean = pps * dur
    assert ps.expected_packets() == pytest.approx(mean)
    assert abs(t.size - mean) < 3 * np.sqrt(mean)
    gaps = np.diff(t).astype(float)
    assert abs(gaps.std() / gaps.mean() - 1) < 0.01


def test_constant_spacing_exact():
    t, _, _ = collect(stream(spec(group(arrivals="constant", rate={"pps": 1e6})), duration=0.01))
    assert t.size == 10_000 and t[0] == 0 and np.all(np.diff(t) == 1000)
    # Non-integer period: t_k = floor(k * 1e9 / 3) exactly, across block edges (1 s cap).
    sp = spec(group(arrivals="constant", rate={"pps": 3}, start=0.5))
    t, _, _ = collect(stream(sp, duration=10.0))
    k = np.arange(t.size)
    np.testing.assert_array_equal(t, 500_000_000 + (k * 10**9) // 3)
    assert t.size == 29 and t[-1] < 10**10
    t, _, _ = collect(stream(spec(group(arrivals="constant", rate={"pps": 0.25})), duration=20.0))
    np.testing.assert_array_equal(t, np.arange(5) * 4 * 10**9)


def test_onoff_duty_cycle_and_windows():
    on, off, pps = 0.001, 0.004, 2_000_000
    for within in ("poisson", "constant"):
        sp = spec(
            group(
                arrivals={"process": "onoff", "on_s": on, "off_s": off, "within": within},
                rate={"pps": pps},
                start=0.002,
            )
        )
        ps = stream(sp, duration=0.5)
        t, _, _ = collect(ps)
        phase = (t - 2_000_000) % 5_000_000
        assert np.all(phase < 1_000_000)
        mean = 100 * pps * on  # 100 whole ON periods fit in [start, duration)
        assert ps.expected_packets() == pytest.approx(mean)
        assert abs(t.size - mean) < 3 * np.sqrt(mean) + 1
        if within == "constant":  # every burst restarts at its ON edge
            assert t.size == 100 * 2000 and np.all(phase[:2000] == np.arange(2000) * 500)
    ft = build_flows(sp, 1)
    assert ft.rate_pps.sum() == pytest.approx(pps * on / (on + off))


def test_start_stop_and_duration_windows():
    sp = spec(
        group(name="a", start=0.02, stop=0.05, rate={"pps": 1e6}),
        group(name="b", start=0.08, rate={"pps": 1e6}),
        group(name="c", start=0.2, rate={"pps": 1e6}),
    )
    t, flow, _ = collect(stream(sp, duration=0.1))
    a, b = t[flow < 10], t[(flow >= 10) & (flow < 20)]
    assert a.min() >= 20_000_000 and a.max() < 50_000_000
    assert b.min() >= 80_000_000 and b.max() < 100_000_000
    assert not np.any(flow >= 20)
    assert stream(sp, duration=0.1).expected_packets() == pytest.approx(50_000)


# --- per-flow and size mix --------------------------------------------------------------


def test_zipf_weights_rank_order():
    s, n = 1.1, 50
    sp = spec(group(flows=n, rate={"pps": 1e6, "per_flow": "zipf", "zipf_s": s}))
    ft = build_flows(sp, 5)
    w = np.sort(ft.weight)[::-1]
    expect = np.arange(1, n + 1) ** -s
    np.testing.assert_allclose(w, expect / expect.sum())
    assert not np.array_equal(np.argsort(-ft.weight), np.arange(n))  # ranks are shuffled
    _, flow, _ = collect(stream(sp, seed=5, duration=0.2))
    counts = np.bincount(flow, minlength=n)
    exp = ft.weight * flow.size
    assert np.all(np.abs(counts - exp) < 5 * np.sqrt(exp) + 1)
    top = np.argsort(-ft.weight)[:5]
    assert np.all(np.diff(counts[top]) < 0)


def test_explicit_weights_proportions():
    w = [1, 0, 2, 7]
    sp = spec(group(flows=4, rate={"pps": 1e6, "per_flow": "explicit", "weights": w}))
    _, flow, _ = collect(stream(sp, duration=0.1))
    counts = np.bincount(flow, minlength=4)
    assert counts[1] == 0
    p = np.array(w) / sum(w)
    exp = p * flow.size
    nz = p > 0
    chi2 = (((counts - exp)[nz]) ** 2 / exp[nz]).sum()
    assert chi2 < 16.3  # chi-square, 3 dof, p = 0.001


def test_size_mix():
    sp = spec(group(size={"choices": [64, 1518], "weights": [0.9, 0.1]}, rate={"pps": 1e6}))
    _, _, size = collect(stream(sp, duration=0.1))
    assert set(np.unique(size)) == {64, 1518}
    frac = np.mean(size == 1518)
    assert abs(frac - 0.1) < 3 * np.sqrt(0.09 / size.size)


# --- flow table ---------------------------------------------------------------------------


def test_flow_table_v4_columns():
    sp = spec(
        group(
            flows=300,
            src={"cidr": "10.1.0.0/16"},
            sport={"sequential": 2000},
            dport={"range": [100, 200]},
            proto="tcp",
        )
    )
    ft = build_flows(sp, 9)
    assert len(ft) == 300 and ft.src_v4.dtype == np.uint32 and ft.sport.dtype == np.uint16
    assert np.all((ft.src_v4 >> 16) == (10 << 8 | 1)) and len(np.unique(ft.src_v4)) > 290
    assert np.all(ft.dst_v4 == int(ipaddress.IPv4Address("192.168.0.1")))
    np.testing.assert_array_equal(ft.sport, 2000 + np.arange(300))
    assert ft.dport.min() >= 100 and ft.dport.max() <= 200
    assert np.all(ft.proto == 6) and not ft.is_v6.any() and not ft.src_v6.any()
    assert ft.describe(0).startswith("tcp 10.1.") and ft.describe(0).endswith(
        f" -> 192.168.0.1:{ft.dport[0]}"
    )
    again = build_flows(sp, 9)
    np.testing.assert_array_equal(ft.src_v4, again.src_v4)
    assert not np.array_equal(ft.src_v4, build_flows(sp, 10).src_v4)


def test_flow_table_v6_and_lists():
    sp = spec(
        group(name="a", flows=2, src={"addr": "10.0.0.1"}),
        group(
            name="b",
            flows=5,
            ip=6,
            src={"cidr": "2001:db8:aa::/48"},
            dst={"list": ["2001:db8::1", "2001:db8::2"]},
        ),
    )
    ft = build_flows(sp, 2)
    v6 = ft.rows(1)
    assert list(ft.group_first) == [0, 2] and ft.group_names == ["a", "b"]
    assert ft.is_v6[v6].all() and not ft.is_v6[:2].any()
    assert not ft.src_v4[v6].any() and ft.src_v6.shape == (7, 16)
    net = ipaddress.IPv6Network("2001:db8:aa::/48")
    assert all(ipaddress.IPv6Address(b.tobytes()) in net for b in ft.src_v6[v6])
    dsts = [str(ipaddress.IPv6Address(b.tobytes())) for b in ft.dst_v6[v6]]
    assert dsts == ["2001:db8::1", "2001:db8::2"] * 2 + ["2001:db8::1"]
    assert (
        ft.describe(3) == f"udp [{ipaddress.IPv6Address(ft.src_v6[3].tobytes())}]:"
        f"{ft.sport[3]} -> [2001:db8::2]:9000"
    )


def test_spoofed_defaults():
    sp = spec(group(spoofed=True, flows=None, src=None, rate={"pps": 1e5}))
    g = sp.groups[0]
    assert g.flows == 65536 and g.src.cidr == "0.0.0.0/0" and g.sport.range == [1024, 65535]
    ft = build_flows(sp, 1)
    assert len(np.unique(ft.src_v4)) > 65000 and len(np.unique(ft.sport)) > 40000
    v6 = spec(group(spoofed=True, flows=None, src=None, ip=6, dst={"addr": "::1"}))
    assert v6.groups[0].src.cidr == "::/0"
    with pytest.raises(ValidationError, match="per_flow: constant"):
        spec(
            group(
                spoofed=True, flows=None, src=None, rate={"pps": 1, "per_flow": "zipf", "zipf_s": 1}
            )
        )


# --- schema errors ------------------------------------------------------------------------


def _err(*groups, **top):
    with pytest.raises(ValidationError) as ei:
        TrafficSpec.model_validate({"groups": list(groups), **top})
    (e,) = ei.value.errors()
    return ".".join(map(str, e["loc"])), e["msg"]


@pytest.mark.parametrize(
    "bad, loc, text",
    [
        (dict(burst=1), "groups.0.burst", "Extra inputs"),
        (dict(rate={"pps": -5}), "groups.0.rate.pps", "must be > 0"),
        (dict(rate={"pps": 0}), "groups.0.rate.pps", "must be > 0"),
        (dict(rate={"pps": 1e-9}), "groups.0.rate.pps", "outside"),
        (dict(src={"cidr": "10.0.0.0/33"}), "groups.0.src.cidr", "not a CIDR"),
        (dict(src={"cidr": "10.0.0.0/8", "addr": "10.0.0.1"}), "groups.0.src", "exactly one"),
        (dict(dst={"addr": "2001:db8::1"}), "groups.0.dst", "ip: 4"),
        (
            dict(flows=3, rate={"pps": 1, "per_flow": "explicit", "weights": [1, 2]}),
            "groups.0.rate",
            "weights has 2 entries but flows is 3",
        ),
        (dict(rate={"pps": 1, "per_flow": "zipf"}), "groups.0.rate", "zipf_s"),
        (dict(dport={"value": 70000}), "groups.0.dport.value", "65535"),
        (dict(dport={"range": [9, 3]}), "groups.0.dport.range", "lo <= hi"),
        (dict(sport={"sequential": 65530}), "groups.0.sport", "passes 65535"),
        (dict(size=10), "groups.0.size.choices", "64..9018"),
        (dict(arrivals="bursty"), "groups.0.arrivals", "not an arrival process"),
        (dict(arrivals={"process": "onoff", "on_s": 0.1}), "groups.0.arrivals", "off_s"),
        (dict(start=2.0, stop=1.0), "groups.0.stop", "must be > start"),
        (dict(name="a b"), "groups.0.name", "not a valid name"),
        (dict(flows=None), "groups.0.flows", "required"),
    ],
)
def test_schema_errors_name_the_field(bad, loc, text):
    got_loc, msg = _err(group(**bad))
    assert got_loc == loc and text in msg


def test_schema_group_level_errors():
    loc, msg = _err()  # no groups and no pcap: nothing to send
    assert "define groups" in msg and "pcap" in msg
    loc, msg = _err(group(), group())
    assert loc == "groups" and "duplicate name 'g'" in msg
    assert _err(group(), extra=1)[0] == "extra"


def test_spec_round_trips_through_yaml():
    yaml = pytest.importorskip("yaml")
    text = yaml.safe_dump(MIXED.model_dump(mode="json"))
    assert TrafficSpec.model_validate(yaml.safe_load(text)) == MIXED
    short = yaml.safe_load(
        "groups:\n"
        "  - {name: x, flows: 2, src: {list: [10.0.0.1]}, dst: {addr: 10.0.0.2},\n"
        "     sport: {value: 1}, dport: {value: 2}, rate: {pps: 1.0e+3}, size: 1518}\n"
    )
    g = TrafficSpec.model_validate(short).groups[0]
    assert g.size.choices == [1518] and g.arrivals.process == "poisson" and g.src.list_


@pytest.mark.parametrize("pps, on, off", [(3_300_000.123, 0.0013, 0.0007), (2e5, 0.05, 0.01)])
def test_onoff_constant_matches_brute_force(pps, on, off):
    from fractions import Fraction

    start, dur = 3_100_000, 0.2
    sp = spec(
        group(
            arrivals={"process": "onoff", "on_s": on, "off_s": off, "within": "constant"},
            rate={"pps": pps},
            start=start / 1e9,
        )
    )
    t, _, _ = collect(stream(sp, duration=dur))
    p = Fraction(10**9) / Fraction(pps).limit_denominator(1000)
    on_ns, per = round(on * 1e9), round((on + off) * 1e9)
    burst = [int(j * p) for j in range(int(on_ns / p) + 2) if int(j * p) < on_ns]
    ref = [start + m * per + o for m in range(200) for o in burst]
    np.testing.assert_array_equal(t, [x for x in ref if x < dur * 1e9])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=2, max_size=5))
def test_group_merge_is_the_stable_argsort_order(runs):
    """The jitted k-way merge gives exactly the order of a stable argsort of the
    concatenation (time, then group, then generation order), ties included."""
    from rxlab.traffic.stream import _merge

    pieces = []
    for g, r in enumerate(runs):
        t = np.sort(np.array(r, np.int64))
        pieces.append((t, np.arange(t.size, dtype=np.int32) + 1000 * g,
                       np.full(t.size, g, np.int32)))
    t, flow, size = (np.concatenate(c) for c in zip(*pieces, strict=True))
    order = np.argsort(t, kind="stable")
    got = _merge(pieces)
    for want, have in zip((t[order], flow[order], size[order]), got, strict=True):
        assert have.dtype == want.dtype
        np.testing.assert_array_equal(have, want)
