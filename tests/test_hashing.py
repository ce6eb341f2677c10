"""Hashes of the receive path: Toeplitz (NIC RSS), indirection tables, kernel flow hash."""

import ipaddress
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxlab.kernel.flow_hash import (
    DEFAULT_HASHRND,
    flow_keys_bytes,
    siphash24,
    siphash_key,
    skb_get_hash_flows,
)
from rxlab.kernel.hashfn import hash_32, ilog2, reciprocal_scale, roundup_pow_of_two, s32_diff
from rxlab.nic.indirection import (
    default_table,
    equal_table,
    explicit_table,
    queue_of,
    weight_table,
)
from rxlab.nic.toeplitz import (
    MS_RSS_KEY,
    check_fields,
    convert_rss_key,
    hash_input,
    parse_addrs,
    parse_key,
    rss_hash_flows,
    softrss,
    toeplitz_hash,
    tuple_bytes_v4,
    tuple_bytes_v6,
    v4_mapped,
)

SETTINGS = settings(max_examples=60, deadline=None)

# Microsoft's RSS verification suite ("Verifying the RSS Hash Calculation", Windows driver
# docs): src, sport, dst, dport, 2-tuple, 4-tuple.
MS_VECTORS = [
    ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323E8FC2, 0x51CCC178),
    ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xD718262A, 0xC626B0EA),
    ("24.19.198.95", 12898, "12.22.207.184", 38024, 0xD2D0A5DE, 0x5C2B394A),
    ("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xAFC7327F),
    ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5D1809C5, 0x10E828A2),
    ("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2CC18CD5, 0x40207D3D),
    ("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0F0C461C, 0xDDE51BBF),
    ("3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024,
     0x4B61E985, 0x02D1FEEF),
]
MS_CASES = [(v, ports) for v in MS_VECTORS for ports in (False, True)]

# SipHash-2-4 paper vectors: key 00..0f, message 00..(n-1), n = 0..63 (as u64).
SIP64 = [
    0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a, 0x85676696d7fb7e2d,
    0xcf2794e0277187b7, 0x18765564cd99a68d, 0xcbc9466e58fee3ce, 0xab0200f58b01d137,
    0x93f5f5799a932462, 0x9e0082df0ba9e4b0, 0x7a5dbbc594ddb9f3, 0xf4b32f46226bada7,
    0x751e8fbc860ee5fb, 0x14ea5627c0843d90, 0xf723ca908e7af2ee, 0xa129ca6149be45e5,
    0x3f2acc7f57c29bdb, 0x699ae9f52cbe4794, 0x4bc1b3f0968dd39c, 0xbb6dc91da77961bd,
    0xbed65cf21aa2ee98, 0xd0f2cbb02e3b67c7, 0x93536795e3a33e88, 0xa80c038ccd5ccec8,
    0xb8ad50c6f649af94, 0xbce192de8a85b8ea, 0x17d835b85bbb15f3, 0x2f2e6163076bcfad,
    0xde4daaaca71dc9a5, 0xa6a2506687956571, 0xad87a3535c49ef28, 0x32d892fad841c342,
    0x7127512f72f27cce, 0xa7f32346f95978e3, 0x12e0b01abb051238, 0x15e034d40fa197ae,
    0x314dffbe0815a3b4, 0x027990f029623981, 0xcadcd4e59ef40c4d, 0x9abfd8766a33735c,
    0x0e3ea96b5304a7d0, 0xad0c42d6fc585992, 0x187306c89bc215a9, 0xd4a60abcf3792b95,
    0xf935451de4f21df2, 0xa9538f0419755787, 0xdb9acddff56ca510, 0xd06c98cd5c0975eb,
    0xe612a3cb9ecba951, 0xc766e62cfcadaf96, 0xee64435a9752fe72, 0xa192d576b245165a,
    0x0a8787bf8ecb74b2, 0x81b3e73d20b49b6f, 0x7fa8220ba3b2ecea, 0x245731c13ca42499,
    0xb78dbfaf3a8d83bd, 0xea1ad565322a1a0b, 0x60e61c23a3795013, 0x6606d7e446282b93,
    0x6ca4ecb15c5f91e1, 0x9f626da15c9625f3, 0xe51b38608ef25f57, 0x958a324ceb064572,
]


def _packed(addr: str) -> bytes:
    return ipaddress.ip_address(addr).packed


def _ms_input(v, with_ports: bool) -> bytes:
    src, sport, dst, dport = v[:4]
    ports = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") if with_ports else b""
    return _packed(src) + _packed(dst) + ports


u32s = st.integers(0, 0xFFFFFFFF)
ports = st.integers(0, 0xFFFF)
v6addr = st.binary(min_size=16, max_size=16)


# ---- Toeplitz ------------------------------------------------------------------------


@pytest.mark.parametrize("v,with_ports", MS_CASES)
def test_ms_vectors_scalar(v, with_ports):
    assert toeplitz_hash(MS_RSS_KEY, _ms_input(v, with_ports)) == v[5 if with_ports else 4]


@pytest.mark.parametrize("v,with_ports", MS_CASES)
def test_ms_vectors_vectorised(v, with_ports):
    src, sport, dst, dport = v[:4]
    table = convert_rss_key(MS_RSS_KEY)
    if ":" in src:
        rows = tuple_bytes_v6(np.frombuffer(_packed(src), np.uint8),
                              np.frombuffer(_packed(dst), np.uint8), sport, dport, with_ports)
    else:
        rows = tuple_bytes_v4(int(ipaddress.IPv4Address(src)), int(ipaddress.IPv4Address(dst)),
                              sport, dport, with_ports)
    assert rows[0].tobytes() == _ms_input(v, with_ports)
    assert int(softrss(table, rows)[0]) == v[5 if with_ports else 4]


def test_ms_vectors_mixed_flow_table():
    s16, v6 = parse_addrs([v[0] for v in MS_VECTORS])
    d16, _ = parse_addrs([v[2] for v in MS_VECTORS])
    sp, dp = [v[1] for v in MS_VECTORS], [v[3] for v in MS_VECTORS]
    four = rss_hash_flows(MS_RSS_KEY, s16, d16, sp, dp, v6, "sdfn")
    two = rss_hash_flows(convert_rss_key(MS_RSS_KEY), s16, d16, sp, dp, v6, "sd")
    assert four.tolist() == [v[5] for v in MS_VECTORS]
    assert two.tolist() == [v[4] for v in MS_VECTORS]
    # Per-flow-type fields: UDP on the 2-tuple, TCP on the 4-tuple.
    proto = [6, 17, 6, 17, 6, 17, 6, 17]
    mixed = rss_hash_flows(MS_RSS_KEY, s16, d16, sp, dp, v6, {"udp4": "sd", "udp6": "sd"},
                           proto=proto)
    want = [v[5] if p == 6 else v[4] for v, p in zip(MS_VECTORS, proto, strict=True)]
    assert mixed.tolist() == want


def test_rss_hash_flows_single_family_layouts():
    v4 = [v for v in MS_VECTORS if ":" not in v[0]]
    src = np.array([int(ipaddress.IPv4Address(v[0])) for v in v4], dtype=np.uint32)
    dst = np.array([int(ipaddress.IPv4Address(v[2])) for v in v4], dtype=np.uint32)
    h = rss_hash_flows(MS_RSS_KEY, src, dst, [v[1] for v in v4], [v[3] for v in v4])
    assert h.tolist() == [v[5] for v in v4]
    assert (v4_mapped(src)[:, 12:] == tuple_bytes_v4(src, dst, with_ports=False)[:, :4]).all()


def test_parse_key_forms_and_errors():
    plain = MS_RSS_KEY.hex()
    assert parse_key(plain) == MS_RSS_KEY
    assert parse_key(":".join(f"{b:02X}" for b in MS_RSS_KEY)) == MS_RSS_KEY
    with pytest.raises(ValueError, match="not a hex"):
        parse_key("zz" * 40)
    with pytest.raises(ValueError, match="odd"):
        parse_key(plain + "a")
    with pytest.raises(ValueError, match="at least 40"):
        parse_key(plain[:78])
    with pytest.raises(ValueError, match="2 hex digits"):
        parse_key("6d:5a:5" + ":00" * 40)


@SETTINGS
@given(st.binary(min_size=40, max_size=52), st.integers(1, 36), st.data())
def test_vectorised_equals_scalar(key, width, data):
    rows = data.draw(st.lists(st.binary(min_size=width, max_size=width), min_size=1,
                              max_size=8))
    arr = np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), width)
    got = softrss(convert_rss_key(key), arr)
    assert got.tolist() == [toeplitz_hash(key, r) for r in rows]


@SETTINGS
@given(st.binary(min_size=42, max_size=42), st.integers(1, 36), st.data())
def test_toeplitz_is_linear(key, width, data):
    a = data.draw(st.binary(min_size=width, max_size=width))
    b = data.draw(st.binary(min_size=width, max_size=width))
    ab = bytes(x ^ y for x, y in zip(a, b, strict=True))
    assert toeplitz_hash(key, ab) == toeplitz_hash(key, a) ^ toeplitz_hash(key, b)
    assert toeplitz_hash(key, a + b"\0\0") == toeplitz_hash(key, a)  # trailing zeros


@SETTINGS
@given(u32s, u32s, ports, ports, v6addr, v6addr, st.sampled_from(["sym-xor", "sym-or-xor"]))
def test_symmetric_xfrm_is_direction_independent(a, b, pa, pb, a6, b6, xfrm):
    table = convert_rss_key(MS_RSS_KEY)
    fwd = softrss(table, tuple_bytes_v4(a, b, pa, pb, input_xfrm=xfrm))
    rev = softrss(table, tuple_bytes_v4(b, a, pb, pa, input_xfrm=xfrm))
    assert fwd[0] == rev[0]
    r6 = [np.frombuffer(x, np.uint8) for x in (a6, b6)]
    fwd6 = softrss(table, tuple_bytes_v6(r6[0], r6[1], pa, pb, input_xfrm=xfrm))
    rev6 = softrss(table, tuple_bytes_v6(r6[1], r6[0], pb, pa, input_xfrm=xfrm))
    assert fwd6[0] == rev6[0]
    s16, d16 = v4_mapped([a, a]), v4_mapped([b, b])
    h = rss_hash_flows(MS_RSS_KEY, np.vstack([s16[:1], d16[:1]]), np.vstack([d16[:1], s16[:1]]),
                       [pa, pb], [pb, pa], [False, False], "sdfn", xfrm)
    assert h[0] == h[1] == fwd[0]


def test_xfrm_input_layout():
    rows = tuple_bytes_v4(0x01020304, 0x10203040, 0x0102, 0x0201, input_xfrm="sym-or-xor")
    assert rows[0].tobytes().hex() == "11223344" "11223344" "0303" "0303"
    rows = tuple_bytes_v4(0x01020304, 0x10203041, 0x0102, 0x0201, input_xfrm="sym-xor")
    assert rows[0].tobytes().hex() == "11223345" "11223345" "0303" "0303"


def test_field_selection_rules():
    assert check_fields("nfds") == "sdfn"
    assert check_fields("sd", "tcp4") == "sd"
    with pytest.raises(ValueError, match="no L4 ports"):
        check_fields("sdfn", "ip4")
    with pytest.raises(ValueError, match="src with dst"):
        check_fields("sdf", "tcp4", "sym-xor")
    with pytest.raises(ValueError, match="not modelled"):
        check_fields("sdv")
    with pytest.raises(ValueError, match="input_xfrm"):
        check_fields("sd", None, "bogus")
    # 'sdf': only the source port after the addresses (10 bytes).
    rows = hash_input(np.zeros((1, 4), np.uint8), np.zeros((1, 4), np.uint8), 0x1234, 1, "sdf")
    assert rows[0].tobytes().hex() == "00000000000000001234"


def test_short_key_rejected():
    with pytest.raises(ValueError, match="key of >= 40"):
        toeplitz_hash(MS_RSS_KEY[:39], bytes(36))
    with pytest.raises(ValueError, match="key of >= 40"):
        softrss(convert_rss_key(MS_RSS_KEY[:39]), np.zeros((1, 36), np.uint8))


# ---- hash_32 / reciprocal_scale / u32 wrap -------------------------------------------


def test_hash_32_and_reciprocal_scale_vectors():
    assert hash_32(0x12345678, 10) == 0x1DE
    assert hash_32(0xDEADBEEF, 12) == 1757
    assert hash_32(1, 7) == 48
    assert hash_32(0xFFFFFFFF, 32) == (0xFFFFFFFF * 0x61C88647) & 0xFFFFFFFF
    assert reciprocal_scale(0x12345678, 4) == 0
    assert reciprocal_scale(0xDEADBEEF, 3) == 2
    assert reciprocal_scale(0xFFFFFFFF, 5) == 4
    assert reciprocal_scale(0xFFFFFFFF, 0xFFFFFFFF) == 0xFFFFFFFE
    with pytest.raises(ValueError):
        hash_32(1, 0)


def test_s32_diff_wraps():
    assert s32_diff(1, 0xFFFFFFFF) == 2
    assert s32_diff(0xFFFFFFFF, 1) == -2
    assert s32_diff(0, 0x80000000) == -(2**31)
    assert s32_diff(0x7FFFFFFF, 0) == 2**31 - 1
    assert s32_diff(np.uint32(5), np.uint32(7)) == -2
    assert s32_diff(10, 10) == 0


def test_int_helpers_same_without_jit():
    code = (
        "import json; from rxlab.kernel.hashfn import hash_32, reciprocal_scale, s32_diff\n"
        "vals = [0, 1, 2**31 - 1, 2**31, 0xdeadbeef, 0xffffffff]\n"
        "print(json.dumps([[int(hash_32(a, 7)), int(reciprocal_scale(a, b)), int(s32_diff(a, b))]"
        " for a in vals for b in vals]))\n"
    )
    out = {}
    for flag in ("0", "1"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=flag)
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        out[flag] = json.loads(res.stdout)
    assert out["0"] == out["1"]


def test_pow2_helpers():
    assert [roundup_pow_of_two(n) for n in (1, 2, 3, 4, 5, 1000)] == [1, 2, 4, 4, 8, 1024]
    assert [ilog2(n) for n in (1, 2, 3, 4096, 4097)] == [0, 1, 1, 12, 12]
    with pytest.raises(ValueError):
        ilog2(0)


# ---- SipHash and the software flow hash ----------------------------------------------


def test_siphash_paper_vectors():
    k0, k1 = siphash_key(bytes(range(16)).hex())
    msg = np.arange(64, dtype=np.uint8)
    for n, want in enumerate(SIP64):
        assert int(siphash24(k0, k1, msg[:n])) == want, n


def test_siphash_key_errors():
    assert siphash_key(DEFAULT_HASHRND) == siphash_key(b"rxlab-flow-hash!".hex())
    with pytest.raises(ValueError, match="32 hex"):
        siphash_key("abc")


def test_flow_keys_layout_v4():
    # 10.0.0.1:1234 -> 10.0.0.2:80 TCP; ports swap because native-u16 compare on x86 sees
    # 0x5000 (80) < 0xd204 (1234); addresses keep their order (0x0200000a > 0x0100000a).
    buf = flow_keys_bytes(0x0A000001, 0x0A000002, 1234, 80, 6, False)
    want = bytearray(48)
    want[0:3] = b"\x08\x00\x06"
    want[28:32] = bytes.fromhex("005004d2")
    want[36:44] = bytes.fromhex("0a0000010a000002")
    assert buf.shape == (1, 48) and buf[0].tobytes() == bytes(want)
    # 1.0.0.2 vs 2.0.0.1: host order says dst > src, little-endian load says dst < src.
    buf = flow_keys_bytes(0x01000002, 0x02000001, 1, 1, 17, False)
    assert buf[0, 36:44].tobytes().hex() == "0200000101000002"


def test_flow_keys_layout_v6_and_flow_label():
    s, d = _packed("fe80::2"), _packed("fe80::1")
    buf = flow_keys_bytes(s, d, 5, 6, 17, True, flow_label=0x12345)
    assert buf.shape == (1, 72)
    assert buf[0, :8].tobytes().hex() == "86dd1100" "45230100"  # label as host-order u32
    assert buf[0, 28:32].tobytes() == bytes(4)  # stopped at the flow label: no ports
    assert buf[0, 36:68].tobytes() == d + s  # memcmp order
    assert buf[0, 68:].tobytes() == bytes(4)


@SETTINGS
@given(u32s, u32s, ports, ports, v6addr, v6addr, st.sampled_from([6, 17, 132, 1]))
def test_flow_hash_direction_independent(a, b, pa, pb, a6, b6, proto):
    h, l4 = skb_get_hash_flows(None, [a, b], [b, a], [pa, pb], [pb, pa], proto)
    assert h[0] == h[1] != 0 and l4[0] == l4[1]
    r = np.frombuffer(a6 + b6, np.uint8).reshape(2, 16)
    h6, _ = skb_get_hash_flows(DEFAULT_HASHRND, r, r[::-1], [pa, pb], [pb, pa], proto, True)
    assert h6[0] == h6[1] != 0


def test_flow_hash_mixed_family_matches_per_family():
    s16, v6 = parse_addrs(["10.0.0.1", "fe80::1", "192.168.1.7"])
    d16, _ = parse_addrs(["10.0.0.2", "fe80::2", "192.168.1.8"])
    h, l4 = skb_get_hash_flows(None, s16, d16, [1000, 2000, 3000], [80, 443, 53],
                               [6, 17, 17], v6)
    h4, _ = skb_get_hash_flows(None, [0x0A000001, 0xC0A80107], [0x0A000002, 0xC0A80108],
                               [1000, 3000], [80, 53], [6, 17])
    h6, _ = skb_get_hash_flows(None, s16[1:2], d16[1:2], 2000, 443, 17, True)
    assert h.tolist() == [h4[0], h6[0], h4[1]] and l4.all()


def test_l4_hash_flag_rule():
    _, l4 = skb_get_hash_flows(None, [1, 1, 1, 1], [2, 2, 2, 2], [0, 5, 5, 0], [0, 0, 6, 0],
                               [6, 6, 1, 17])
    assert l4.tolist() == [False, True, False, False]  # ports 0, ports, ICMP, ports 0
    r = np.zeros((2, 16), np.uint8)
    _, l4 = skb_get_hash_flows(None, r, r, 0, 0, 1, True, flow_label=[7, 0])
    assert l4.tolist() == [True, False]
    a, _ = skb_get_hash_flows("00" * 16, [1], [2], [5], [6], [6])
    b, _ = skb_get_hash_flows("11" * 16, [1], [2], [5], [6], [6])
    assert a[0] != b[0]  # the key matters


# ---- indirection tables --------------------------------------------------------------


def test_default_and_equal_tables():
    assert default_table(8, 3).tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert equal_table(4, 2).tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError):
        default_table(8, 0)


def test_weight_table_like_ethtool():
    assert weight_table(8, [1, 1]).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert weight_table(8, [3, 0, 1]).tolist() == [0, 0, 0, 0, 0, 0, 2, 2]
    assert weight_table(10, [1, 2, 2]).tolist() == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert np.bincount(weight_table(128, [1, 2, 1])).tolist() == [32, 64, 32]
    with pytest.raises(ValueError, match="non-zero"):
        weight_table(8, [0, 0])
    with pytest.raises(ValueError, match="exceeds"):
        weight_table(4, [3, 2])


def test_explicit_table_netlink_rule():
    assert explicit_table([0, 2], 6, 3).tolist() == [0, 2, 0, 2, 0, 2]
    assert explicit_table([], 4, 2).tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="does not divide"):
        explicit_table([0, 1, 2], 8, 3)
    with pytest.raises(ValueError, match="not a valid RX ring"):
        explicit_table([0, 3], 8, 3)


def test_queue_of():
    t = default_table(128, 4)
    assert queue_of(0x51CCC178, t) == 0x78 % 4
    assert queue_of(np.array([1, 2, 130], np.uint32), t).tolist() == [1, 2, 2]
    assert queue_of(7, default_table(6, 6)) == 1  # non power of two: hash % size
