"""SO_REUSEPORT socket choice: reuseport_select_sock_by_hash() picks
socks[reciprocal_scale(hash, n)] (net/core/sock_reuseport.c) with the lookup's own keyed
hash of the 4-tuple (udp_ehashfn / inet_ehashfn / udp6_ehashfn / inet6_ehashfn), not the
skb hash that RPS uses.

The reference is a C program compiled here with gcc: Bob Jenkins' lookup3 hashword()
(public domain, burtleburtle.net/bob/c/lookup3.c), which jhash2() and jhash_3words() of
include/linux/jhash.h equal, fed the header fields through htonl()/htons() as the kernel
reads them from the packet. Secrets are arbitrary draws (the kernel's are boot-random);
the model's come from the scenario seed, and the test gives the same ones to C.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from rxlab.build import build
from rxlab.reuseport import ehash_secrets, jhash2_4, jhash_3words
from rxlab.scenario import scenario_from_dict

LOOKUP3 = r"""
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#define rot(x,k) (((x)<<(k)) | ((x)>>(32-(k))))
#define mix(a,b,c) { \
  a -= c;  a ^= rot(c, 4);  c += b; \
  b -= a;  b ^= rot(a, 6);  a += c; \
  c -= b;  c ^= rot(b, 8);  b += a; \
  a -= c;  a ^= rot(c,16);  c += b; \
  b -= a;  b ^= rot(a,19);  a += c; \
  c -= b;  c ^= rot(b, 4);  b += a; }
#define final(a,b,c) { \
  c ^= b; c -= rot(b,14); \
  a ^= c; a -= rot(c,11); \
  b ^= a; b -= rot(a,25); \
  c ^= b; c -= rot(b,16); \
  a ^= c; a -= rot(c,4);  \
  b ^= a; b -= rot(a,14); \
  c ^= b; c -= rot(b,24); }

/* lookup3.c hashword() */
static uint32_t hashword(const uint32_t *k, size_t length, uint32_t initval)
{
  uint32_t a, b, c;
  a = b = c = 0xdeadbeef + (((uint32_t)length) << 2) + initval;
  while (length > 3) { a += k[0]; b += k[1]; c += k[2]; mix(a,b,c); length -= 3; k += 3; }
  switch (length) {
  case 3: c += k[2];
  case 2: b += k[1];
  case 1: a += k[0]; final(a,b,c);
  case 0: break;
  }
  return c;
}

/* one query per line:
   w N k0..kN-1 iv                      -> hashword(k, N, iv)
   e4 daddr dport saddr sport iv        -> 4-tuple hash, IPv4 (host-order numbers in)
   e6 whole d[16] dport s[16] sport iv fkey -> 4-tuple hash, IPv6 (bytes in wire order) */
int main(void)
{
  char op[4];
  while (scanf("%3s", op) == 1) {
    if (!strcmp(op, "w")) {
      unsigned n, i; uint32_t k[4], iv;
      scanf("%u", &n);
      for (i = 0; i < n; i++) scanf("%u", &k[i]);
      scanf("%u", &iv);
      printf("%u\n", hashword(k, n, iv));
    } else if (!strcmp(op, "e4")) {
      uint32_t d, s, iv; unsigned dp, sp;
      scanf("%u %u %u %u %u", &d, &dp, &s, &sp, &iv);
      uint16_t fport = htons((uint16_t)sp);
      uint32_t k[3] = { htonl(d), htonl(s), ((uint32_t)dp << 16) | fport };
      printf("%u\n", hashword(k, 3, iv));
    } else {
      unsigned whole, i, b, dp, sp; uint8_t d[16], s[16]; uint32_t dw[4], sw[4], iv, fkey, fh;
      scanf("%u", &whole);
      for (i = 0; i < 16; i++) { scanf("%u", &b); d[i] = b; }
      scanf("%u", &dp);
      for (i = 0; i < 16; i++) { scanf("%u", &b); s[i] = b; }
      scanf("%u %u %u", &sp, &iv, &fkey);
      memcpy(dw, d, 16); memcpy(sw, s, 16);  /* s6_addr32[] */
      if (whole) fh = hashword(sw, 4, fkey);
      else { uint32_t x[3] = { sw[0] ^ sw[1], sw[2], sw[3] }; fh = hashword(x, 3, fkey); }
      uint16_t fport = htons((uint16_t)sp);
      uint32_t k[3] = { dw[3], fh, ((uint32_t)dp << 16) | fport };
      printf("%u\n", hashword(k, 3, iv));
    }
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """Run the C reference on a list of query lines; returns the answers as ints."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("lookup3")
    (d / "ref.c").write_text(LOOKUP3)
    subprocess.run([gcc, "-O1", "-o", str(d / "ref"), str(d / "ref.c")], check=True)

    def run(lines: list[str]) -> list[int]:
        out = subprocess.run([str(d / "ref")], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, check=True).stdout
        return [int(x) for x in out.split()]

    return run


EDGE = [0, 1, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, 0xFFFFFFFF]


def test_jhash_matches_lookup3_hashword(ref):
    rng = np.random.default_rng(11)
    w = rng.integers(0, 1 << 32, (400, 5), dtype=np.uint64)
    w[: len(EDGE)] = np.array(EDGE, np.uint64)[:, None]
    w[len(EDGE): 2 * len(EDGE), 4] = EDGE
    got3 = jhash_3words(w[:, 0], w[:, 1], w[:, 2], w[:, 4])
    got4 = jhash2_4(w[:, :4].astype(np.uint32), w[:, 4])
    want = ref([f"w 3 {a} {b} {c} {iv}" for a, b, c, _, iv in w.tolist()]
               + [f"w 4 {a} {b} {c} {d} {iv}" for a, b, c, d, iv in w.tolist()])
    assert got3.tolist() == want[: len(w)]
    assert got4.tolist() == want[len(w):]
    assert len(set(want)) > len(want) * 0.99  # a hash, not a constant


def group(name, proto, ip, flows=64):
    v6 = ip == 6
    return {
        "name": name, "flows": flows, "proto": proto, "ip": ip,
        "src": {"cidr": "2001:db8:1::/48" if v6 else "10.0.0.0/8"},
        "dst": {"addr": "2001:db8:ffff::7" if v6 else "192.168.3.4"},
        "sport": {"range": [1024, 65535]}, "dport": {"value": 4433 if proto == "udp" else 443},
        "rate": {"pps": 20_000}, "size": 200,
    }


def scenario(*, cpus=4, version="6.19", seed=5, groups=None, apps=None, **kernel) -> dict:
    return {
        "name": "reuseport", "seed": seed, "duration": 0.001,
        "host": {"cpus": cpus, "kernel": version},
        "nic": {"queues": cpus, "ring_size": 256},
        "kernel": kernel,
        "traffic": {"groups": groups or [group("u4", "udp", 4)]},
        "apps": apps or [{"name": "srv", "cpus": f"0-{cpus - 1}", "spread": "hash"}],
    }


def kernel_initval(sec: dict, proto: str, ip: int, version: tuple) -> tuple[int, int]:
    """(initval, faddr key) as the lookup functions form them: secret + net_hash_mix(net)."""
    mix = sec["hash_mix"]
    if ip == 4:
        return (sec["udp" if proto == "udp" else "inet"] + mix) & 0xFFFFFFFF, 0
    if proto == "tcp":
        return (sec["inet6"] + mix) & 0xFFFFFFFF, sec["ipv6"]
    # udp6_ehashfn keyed with udp_ipv6_hash_secret until "udp6: fix udp6_ehashfn() typo"
    key = sec["udp6"] if version >= (6, 5) else sec["udp_ipv6"]
    return (key + mix) & 0xFFFFFFFF, sec["udp_ipv6"]


@pytest.mark.parametrize("version", ["6.19", "5.15"])
@pytest.mark.parametrize("proto,ip", [("udp", 4), ("tcp", 4), ("udp", 6), ("tcp", 6)])
def test_socket_is_reciprocal_scale_of_the_lookup_hash(ref, proto, ip, version):
    """Each flow's socket index equals reciprocal_scale(ehashfn(daddr, hnum, saddr,
    sport), n) computed by the C reference from the flow's header fields."""
    n = 3  # not a power of two: reciprocal_scale is not a mask
    sc = scenario_from_dict(scenario(version=version, groups=[group("g", proto, ip, flows=200)],
                                     apps=[{"name": "srv", "cpus": "0-2", "spread": "hash"}]))
    m = build(sc)
    fl, sec = m.flows, ehash_secrets(sc.seed)
    ver = tuple(int(x) for x in version.split("."))
    iv, fkey = kernel_initval(sec, proto, ip, ver)
    lines = []
    for i in range(len(fl)):
        if ip == 4:
            lines.append(f"e4 {fl.dst_v4[i]} {fl.dport[i]} {fl.src_v4[i]} {fl.sport[i]} {iv}")
        else:
            d = " ".join(map(str, fl.dst_v6[i].tolist()))
            s = " ".join(map(str, fl.src_v6[i].tolist()))
            whole = int(ver >= (6, 5))
            lines.append(f"e6 {whole} {d} {fl.dport[i]} {s} {fl.sport[i]} {iv} {fkey}")
    h = np.array(ref(lines), np.uint64)
    want = (h * np.uint64(n)) >> np.uint64(32)
    got = np.asarray(m.params.flow["flow_sock"], np.int64)
    assert got.tolist() == want.astype(np.int64).tolist()
    assert len(set(got.tolist())) == n  # all sockets used: the check can fail


def test_old_and_new_ipv6_hash_differ_same_ipv4(ref):
    """v6.5 changed the IPv6 hash (whole-address __ipv6_addr_jhash, udp6 key); IPv4 kept."""
    socks = {}
    for v in ("6.4", "6.5"):
        m = build(scenario_from_dict(scenario(
            version=v, groups=[group("u4", "udp", 4, 300), group("u6", "udp", 6, 300)])))
        socks[v] = np.asarray(m.params.flow["flow_sock"], np.int64)
    g = m.flows.group
    assert (socks["6.4"][g == 0] == socks["6.5"][g == 0]).all()
    assert (socks["6.4"][g == 1] != socks["6.5"][g == 1]).any()


def test_rps_cpu_and_reader_cpu_are_independent():
    """RPS over all CPUs, one reader per CPU: the backlog CPU is map[reciprocal_scale(skb
    hash, n)] and the reader's is socks[reciprocal_scale(ehash, n)]. Two unrelated hashes:
    a flow's softirq lands on its reader's CPU for about 1/n of flows, not all."""
    ncpu, nflows = 4, 4000
    sc = scenario_from_dict(scenario(cpus=ncpu, rps_cpus="f",
                                     groups=[group("u4", "udp", 4, nflows)]))
    m = build(sc)
    p = m.params
    h = np.asarray(p.flow["flow_hash"], np.uint64)
    q = np.asarray(p.flow["flow_rxq"], np.int64)
    rps_len = np.asarray(p.queue["rps_len"], np.int64)[q]
    assert (rps_len == ncpu).all()
    rps_cpu = np.asarray(p.rps_map)[q, ((h * rps_len.astype(np.uint64)) >> np.uint64(32))
                                    .astype(np.int64)]
    reader_cpu = np.array([m.threads[s][1] for s in np.asarray(p.flow["flow_sock"])])
    same = float((rps_cpu == reader_cpu).mean())
    # binomial(4000, 1/4): sd 0.007; 0.05 is seven of them
    assert abs(same - 1 / ncpu) < 0.05, same


def test_seed_is_the_boot_secret():
    """Same seed: same pick; another seed (another boot): other picks for the same flows."""
    g = group("u4", "udp", 4, 400) | {"src": {"addr": "10.0.0.1"}, "sport": {"sequential": 2000}}
    picks = []
    for seed in (5, 5, 6):
        m = build(scenario_from_dict(scenario(seed=seed, groups=[g])))
        picks.append(dict(zip(m.flows.sport.tolist(), np.asarray(m.params.flow["flow_sock"])
                              .tolist(), strict=True)))
    assert picks[0] == picks[1]
    assert picks[0].keys() == picks[2].keys()
    assert sum(picks[0][a] != picks[2][a] for a in picks[0]) > 200
