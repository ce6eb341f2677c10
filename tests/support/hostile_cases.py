"""Hostile inputs for the ``rxlab`` command line: one table, run as a user would run it.

Each case is a command line plus the files to write first (scenario, capture, rollback or
sweep files). ``run_case`` runs the real entry point (``python -m rxlab.cli.main``) in a
child process under a memory limit and a timeout, so a segfault, a hang or a memory
blowup is a failed case and never a dead machine. ``judge`` accepts only:

* ``ok``: exit 0 and valid JSON on stdout (no NaN or Infinity anywhere), packets
  conserved, no negative latency;
* ``usage``: exit 2 and exactly one line on stderr, starting ``rxlab: error:``.

``either`` accepts both (the kernel allows the value, or rxlab refuses it with a reason).
The table is shared by ``tests/test_hostile_inputs.py`` and ``scripts/reliability.py``
(which writes it into ``docs/reliability.md``).
"""

from __future__ import annotations

import copy
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_YAML = (ROOT / "rxlab" / "scenarios" / "default.yaml").read_text()
DEFAULT = yaml.safe_load(DEFAULT_YAML)
MEM_LIMIT = 3 << 30  # address space per case: far above a normal run (~0.3 GB resident)
TIMEOUT_S = 60.0
COMPILE_NOTICE = "rxlab: compiling the event loop"  # printed once per install, not an error


@dataclass(frozen=True)
class Case:
    id: str
    what: str  # the hostile input, in words
    argv: tuple[str, ...]  # after `rxlab`; run in a folder holding `files`
    expect: str  # "ok" | "usage" | "either"
    group: str
    files: dict = field(default_factory=dict)  # name -> str | bytes, written first
    timeout: float = TIMEOUT_S


@dataclass(frozen=True)
class Delegated:
    """A case another test proves (it needs a network namespace or process trees)."""

    id: str
    what: str
    test: str  # pytest node or file
    group: str


# ------------------------------------------------------------------ file builders


def scenario_yaml(**sets) -> str:
    """The default scenario with dotted paths set (``apps__0__cpus`` = apps.0.cpus)."""
    data = copy.deepcopy(DEFAULT)
    for key, value in sets.items():
        node, parts = data, key.split("__")
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        last = parts[-1]
        node[int(last) if isinstance(node, list) else last] = value
    return yaml.safe_dump(data, sort_keys=False)


def _udp_frame(sport: int, dport: int, payload: int = 18) -> bytes:
    udp = struct.pack(">HHHH", sport, dport, 8 + payload, 0) + bytes(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0,
                     bytes([10, 0, 0, 2]), bytes([192, 168, 0, 1])) + udp
    return bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip


def pcap(records: list[tuple[int, int]], *, orig: int | None = None,
         incl: int | None = None, magic: int = 0xA1B2C3D4) -> bytes:
    """A little-endian pcap (Ethernet) of UDP frames at (seconds, microseconds);
    ``orig``/``incl`` override the record lengths of every record."""
    out = [struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 262144, 1)]
    for i, (sec, usec) in enumerate(records):
        fr = _udp_frame(1024 + i % 7, 9000)
        out.append(struct.pack("<IIII", sec, usec, len(fr) if incl is None else incl,
                               len(fr) if orig is None else orig) + fr)
    return b"".join(out)


# 10^9 references to "x" through 9 anchors of 10 aliases each ("billion laughs")
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n"
    for i in range(8))
GOOD_PCAP = pcap([(0, i * 100) for i in range(50)])


def rollback_doc(**over) -> str:
    """A rollback file in rxlab's format; state rolled-back so a valid one touches
    nothing (``host rollback`` refuses it before writing anything)."""
    doc = {"rxlab_rollback": 1, "created": "2025-01-01T00:00:00+00:00",
           "device": "rxlabnone0", "netns": None, "state": "rolled-back",
           "steps": [{"kind": "sysctl", "target": "netdev_max_backlog",
                      "old": "1000", "new": "2000"}]}
    doc.update(over)
    return json.dumps(doc)


def rollback_step(**over) -> str:
    step = {"kind": "sysctl", "target": "netdev_max_backlog", "old": "1000", "new": "2000"}
    step.update(over)
    return rollback_doc(steps=[step])


def sweep_yaml(grid: dict) -> str:
    return yaml.safe_dump({"name": "hostile", "base": "default", "duration": 0.001,
                           "grid": grid, "metrics": ["delivered_pps"]})


# ------------------------------------------------------------------ the cases

RUN = ("run", "default", "--json")
QUICK = ("--duration", "0.001")
CASES: list[Case] = []


def _add(id, what, argv, expect, group, files=None, timeout=TIMEOUT_S):
    CASES.append(Case(id, what, tuple(argv), expect, group, dict(files or {}), timeout))


def _set(id, what, sets, expect, group, quick=True, extra=()):
    argv = list(RUN) + (list(QUICK) if quick else []) + list(extra)
    for s in sets:
        argv += ["--set", s]
    _add(id, what, argv, expect, group)


# the baseline: proves the harness accepts a correct run
_set("baseline", "the default scenario, unchanged", [], "ok", "baseline")

# --- indices the compiled loop uses
G = "index"
_add("indir-equal9-short", "RSS table spreads over 9 queues on a 4-queue NIC (0.1 ms)",
     RUN + ("--duration", "0.0001", "--set", "nic.rss.indirection={equal: 9}"), "usage", G)
_set("indir-equal9", "RSS table spreads over 9 queues on a 4-queue NIC (20 ms)",
     ["nic.rss.indirection={equal: 9}"], "usage", G, quick=False, extra=("--duration", "0.02"))
_set("indir-equal5", "RSS table over 5 queues, 4 exist", ["nic.rss.indirection={equal: 5}"],
     "usage", G)
_set("indir-weight8", "RSS weights for 8 queues, 4 exist",
     ["nic.rss.indirection={weight: [1,1,1,1,1,1,1,1]}"], "usage", G)
_set("indir-list-oob", "explicit indirection table naming queue 7 of 4",
     ["nic.rss.indirection=[0,1,2,7]"], "usage", G)
_set("indir-list-neg", "explicit indirection table naming queue -1",
     ["nic.rss.indirection=[0,1,2,-1]"], "usage", G)
_set("indir-equal0", "RSS table over 0 queues", ["nic.rss.indirection={equal: 0}"], "usage", G)
_set("indir-weight-zero", "RSS weights all zero",
     ["nic.rss.indirection={weight: [0,0,0,0]}"], "usage", G)
_set("context-oob", "an RSS context whose table names queue 6 of 4",
     ["nic.rss.contexts=[{id: 1, indirection: [6]}]"], "usage", G)
_set("ntuple-context-missing", "an n-tuple rule steering to RSS context 3, which is not defined",
     ["nic.ntuple=[{match: {proto: udp}, context: 3}]"], "usage", G)
_set("ntuple-queue-oob", "an n-tuple rule steering to queue 4 of 4",
     ["nic.ntuple=[{match: {proto: udp}, queue: 4}]"], "usage", G)
_set("irq-affinity-oob", "an IRQ on CPU 9 of 4", ["nic.irq_affinity=[0,1,2,9]"], "usage", G)
_set("rps-queue-oob", "RPS mask for queue 8 of 4", ["kernel.rps_cpus={8: f}"], "usage", G)
_set("rps-mask-oob", "RPS mask naming CPUs 4-7 of 4", ["kernel.rps_cpus=f0"], "usage", G)
_set("rfs-queue-oob", "rps_flow_cnt for queue 9 of 4",
     ["kernel.rps_sock_flow_entries=4096", "kernel.rps_flow_cnt={9: 256}"], "usage", G)
_set("flowlimit-bitmap-oob", "flow-limit bitmap naming CPU 40 of 4",
     ["kernel.flow_limit_cpu_bitmap=10000000000"], "either", G)
_set("queues-gt-table", "a 128-entry table spread over 4096 queues",
     ["nic.queues=4096", "host.cpus=4096", "nic.rss.indirection={equal: 4096}"], "either", G)

# --- CPU sets
G = "cpus"
_set("cpus-empty-list", "an app on no CPU (cpus: [])", ["apps.0.cpus=[]"], "usage", G,
     quick=False, extra=("--duration", "0.02"))
_add("cpus-empty-string", "an app on no CPU (cpus: \"\" in the file)",
     ("run", "s.yaml", "--json", "--duration", "0.02"), "usage", G,
     files={"s.yaml": scenario_yaml(apps__0__cpus="")})
_add("cpus-reversed", "a reversed CPU range \"3-1\"",
     ("run", "s.yaml", "--json", "--duration", "0.02"), "usage", G,
     files={"s.yaml": scenario_yaml(apps__0__cpus="3-1")})
_set("cpus-garbage", "a CPU list that is not one (\"0-x\")", ["apps.0.cpus=0-x"], "usage", G)
_set("cpus-commas", "a CPU list of commas only", ['apps.0.cpus=",,"'], "usage", G)
_set("cpus-negative", "CPU -1", ["apps.0.cpus=-1"], "usage", G)
_set("cpus-huge-range", "CPU range 0-4294967295",
     ["apps.0.cpus=0-4294967295"], "usage", G)
_set("cpus-unicode-digit", "a CPU written with a superscript digit (\"²\")",
     ["apps.0.cpus=²"], "usage", G)
_set("migrate-cpus-empty", "random migration over no CPU",
     ["apps.0.migrate={every_s: 0.001, cpus: []}"], "usage", G)
_set("cpumap-empty", "a cpumap with no CPU",
     ["xdp={rules: [{action: redirect-cpu, cpus: 0}]}", "cpumap={cpus: []}"], "usage", G)

# --- memory a scenario implies
G = "memory"
_set("interval-1e-9", "time-series interval of 1 ns over 0.2 s (2e8 intervals)",
     ["metrics.interval=1e-9"], "ok", G, quick=False)
_set("flows-1e9", "10^9 flows", ["traffic.groups.0.flows=1000000000"], "usage", G)
_set("queues-4096-ring-65536", "4096 queues of 65536 descriptors, 4 GiB limit",
     ["nic.queues=4096", "nic.ring_size=65536"], "usage", G, extra=("--max-memory", "4GiB"))
_set("rfs-tables-huge", "rps_sock_flow_entries 2^29 and rps_flow_cnt 2^20, 1 GiB limit",
     ["kernel.rps_sock_flow_entries=536870912", "kernel.rps_flow_cnt=1048576"], "usage", G,
     extra=("--max-memory", "1GiB"))
_set("max-memory-tiny", "--max-memory 1MiB for the default scenario", [], "usage", G,
     extra=("--max-memory", "1MiB"))
_set("max-memory-garbage", "--max-memory lots", [], "usage", G, extra=("--max-memory", "lots"))
_set("cost-profile-dev-zero", "cost profile /dev/zero", ["host.cost_profile=/dev/zero"],
     "usage", G)
_set("cost-profile-dir", "cost profile is a folder", ["host.cost_profile=/"], "usage", G)
_set("backlog-1e9", "netdev_max_backlog 10^9", ["kernel.netdev_max_backlog=1000000000"],
     "either", G)
_set("rcvbuf-1e12", "SO_RCVBUF of 10^12 bytes", ["apps.0.rcvbuf=1000000000000"], "either", G)
_set("duration-1e5", "10^5 s of traffic at 0.01 packets/s (10^7 time-series intervals)",
     ["duration=100000", "traffic.groups.0.rate.pps=0.01", "traffic.groups.0.flows=1",
      "traffic.groups.0.rate.per_flow=constant", "traffic.groups.0.rate.zipf_s=null"],
     "ok", G, quick=False)
_set("seed-2-64", "seed 2^64", ["seed=18446744073709551616"], "either", G)
_add("groups-3000", "3,000 traffic groups of 2 flows at 1,000 pps (~0.3 GB resident)",
     ("run", "s.yaml", "--json", "--duration", "0.001"), "ok", G,
     files={"s.yaml": json.dumps({**DEFAULT, "traffic": {"groups": [
         {**DEFAULT["traffic"]["groups"][0], "name": f"g{i}", "flows": 2,
          "rate": {"pps": 1000}} for i in range(3000)]}})})  # JSON is YAML, and quick to write
_add("capture-two-days", "a capture of two packets two days apart",
     ("run", "default", "--json", "--pcap", "c.pcap"), "ok", G,
     files={"c.pcap": pcap([(0, 0), (2 * 86400, 0)])})

# --- non-finite and extreme numbers
G = "numbers"
_set("costs-nan", "a stage cost of NaN", ["host.costs={stack_rx: .nan}"], "usage", G,
     quick=False)
_set("costs-inf", "a stage cost of infinity", ["host.costs={stack_rx: .inf}"], "usage", G)
_set("costs-1e300", "a stage cost of 1e300 ns", ["host.costs={stack_rx: 1e300}"], "usage", G)
_set("jitter-cv-inf", "lognormal cost jitter with cv infinite",
     ["host.cost_jitter={dist: lognormal, cv: .inf}"], "usage", G, quick=False)
_set("jitter-cv-nan", "lognormal cost jitter with cv NaN",
     ["host.cost_jitter={dist: lognormal, cv: .nan}"], "usage", G)
for _path, _extra in (("drain", ()), ("metrics.warmup", ()), ("nic.rx_usecs", ()),
                      ("traffic.groups.0.stop", ()), ("traffic.groups.0.start", ()),
                      ("nic.arfs.delay_us", ("nic.arfs.model=ice-hash-match",))):
    _tag = _path.split(".")[-1].replace("_", "-")
    _set(f"{_tag}-inf", f"{_path} infinite", list(_extra) + [f"{_path}=.inf"], "usage", G)
    _set(f"{_tag}-1e300", f"{_path} 1e300", list(_extra) + [f"{_path}=1e300"],
         "usage" if _path == "drain" else "either", G)
_set("max-pps-tiny", "NIC packet-rate ceiling 1e-300 pps", ["nic.max_pps=1e-300"], "either", G)
_set("link-gbps-tiny", "link speed 1e-300 Gb/s", ["nic.link_gbps=1e-300"], "either", G)
_set("link-gbps-inf", "link speed infinite", ["nic.link_gbps=.inf"], "usage", G)
_set("max-pps-nan", "NIC packet-rate ceiling NaN", ["nic.max_pps=.nan"], "usage", G)
_set("user-ns-nan", "application cost NaN", ["apps.0.cost.user_ns=.nan"], "usage", G)
_set("interval-nan", "time-series interval NaN", ["metrics.interval=.nan"], "usage", G)
_set("period-inf", "aRFS expiry period infinite",
     ["nic.arfs={model: ice-hash-match, period_s: .inf}"], "usage", G)
_set("migrate-every-tiny", "random migration every 1e-300 s",
     ["apps.0.migrate={every_s: 1e-300, cpus: 0-3}"], "either", G)
_set("hashrnd-zz", "flow-dissector key 'zz'", ["kernel.hashrnd=zz"], "usage", G)
_set("rss-key-short", "RSS key of 2 bytes", ["nic.rss.key=abcd"], "usage", G)
_set("pps-1e10-flows-1", "10^10 pps (the schema's ceiling) for 1 ms", [
    "traffic.groups.0.rate.pps=1e10"], "either", G)
_add("duration-nan", "--duration nan", RUN + ("--duration", "nan"), "usage", G)
_add("duration-inf", "--duration inf", RUN + ("--duration", "inf"), "usage", G)
_add("duration-tiny", "--duration 1e-300", RUN + ("--duration", "1e-300"), "either", G)
_add("seed-negative", "--seed -1", RUN + QUICK + ("--seed", "-1"), "usage", G)
_add("capture-wirelen-max", "a capture record with wire length 0xFFFFFFFF",
     ("run", "default", "--json", "--pcap", "c.pcap"), "either", G,
     files={"c.pcap": pcap([(0, 0), (0, 10)], orig=0xFFFFFFFF)})
_add("capture-speedup-tiny", "--speedup 1e-300", ("run", "default", "--json", "--pcap",
     "c.pcap", "--speedup", "1e-300"), "usage", G, files={"c.pcap": GOOD_PCAP})
_add("capture-speedup-huge", "--speedup 1e300", ("run", "default", "--json", "--pcap",
     "c.pcap", "--speedup", "1e300"), "either", G, files={"c.pcap": GOOD_PCAP})
_add("capture-speedup-nan", "--speedup nan", ("run", "default", "--json", "--pcap",
     "c.pcap", "--speedup", "nan"), "usage", G, files={"c.pcap": GOOD_PCAP})
_add("capture-speedup-zero", "--speedup 0", ("run", "default", "--json", "--pcap",
     "c.pcap", "--speedup", "0"), "usage", G, files={"c.pcap": GOOD_PCAP})

# --- malformed scenario files
G = "files"
_add("traffic-list", "traffic: [1, 2]", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": "name: x\ntraffic: [1, 2]\n"})
_add("traffic-scalar", "traffic: x", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": "name: x\ntraffic: x\n"})
_add("top-list", "a scenario file holding a list", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": "[1, 2]\n"})
_add("empty-file", "an empty scenario file", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": ""})
_add("random-bytes", "random bytes", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": bytes((i * 193 + 71) % 256 for i in range(4096))})
_add("latin-1", "a latin-1 file (name: caf\\xe9)", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": DEFAULT_YAML.replace("name: default", "name: café").encode("latin-1")})
_add("utf-16", "a UTF-16 file", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": DEFAULT_YAML.encode("utf-16")})
_add("utf-8-bom", "a UTF-8 file with a byte-order mark", ("run", "s.yaml", "--json",
     "--duration", "0.001"), "ok", G, files={"s.yaml": DEFAULT_YAML.encode("utf-8-sig")})
_add("nul-byte", "a NUL byte in the file", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": DEFAULT_YAML.replace("name: default", "name: de\x00fault")})
_add("nested-20000", "20,000 nested '['", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": "name: " + "[" * 20000 + "\n"})
_add("nested-map-5000", "5,000 nested mappings", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": "name: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n"})
_add("yaml-alias-bomb", "a YAML alias bomb (10^9 references)", ("run", "s.yaml", "--json"),
     "usage", G, files={"s.yaml": BOMB + "name: *i\n"})
_add("yaml-self-alias", "a YAML alias inside its own anchor (a cycle)",
     ("run", "s.yaml", "--json"), "usage", G, files={"s.yaml": "name: &a [*a]\n"})
_add("profile-alias-bomb", "a cost profile that is an alias bomb", RUN + QUICK + (
     "--set", "host.cost_profile=p.yaml"), "usage", G, files={"p.yaml": BOMB + "stages: *i\n"})
_add("yaml-python-tag", "a !!python/object tag", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": "name: !!python/object/apply:os.getcwd []\n"})
_add("yaml-huge-int", "seed: 10^400", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": DEFAULT_YAML.replace("seed: 1", "seed: 1" + "0" * 400)})
_add("dev-zero-scenario", "scenario /dev/zero", ("run", "/dev/zero", "--json"), "usage", G)
_add("dir-scenario", "scenario is a folder", ("run", ".", "--json"), "usage", G)
_add("missing-scenario", "scenario file missing", ("run", "nope.yaml", "--json"), "usage", G)
_add("big-file", "a 20 MB scenario file (a comment)", ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": DEFAULT_YAML + "#" + "x" * (20 << 20) + "\n"})

# --- --set paths and values
G = "set"
_set("set-list-key", "--set traffic.groups.x.flows=5 (a name where an index goes)",
     ["traffic.groups.x.flows=5"], "usage", G)
_set("set-index-oob", "--set apps.5.cpus=1 (one app exists)", ["apps.5.cpus=1"], "usage", G)
_set("set-index-negative", "--set apps.-1.cpus=1", ["apps.-1.cpus=1"], "usage", G)
_set("set-through-scalar", "--set duration.x=1 (duration is a number)", ["duration.x=1"],
     "usage", G)
_set("set-unclosed", "--set 'name=[unclosed'", ["name=[unclosed"], "usage", G)
_set("set-no-equals", "--set name", ["name"], "usage", G)
_set("set-empty-path", "--set =5", ["=5"], "usage", G)
_set("set-double-dot", "--set nic..queues=2", ["nic..queues=2"], "usage", G)
_set("set-unknown", "--set nic.queuez=2", ["nic.queuez=2"], "usage", G)
_set("set-section-scalar", "--set nic=5", ["nic=5"], "usage", G)
_set("set-newline-path", "--set with a newline in the path", ["nic.que\nues=2"], "usage", G)
_set("set-newline-value", "--set name with a newline in the value",
     ['name="a\\nb"'], "ok", G)
_set("set-superscript-key", "--set '³=1' (a digit to str.isdigit, not to int)", ["³=1"],
     "usage", G)
_set("set-superscript-index", "--set 'apps.².cpus=1'", ["apps.².cpus=1"], "usage", G)
_set("set-tag", "--set seed='!!python/name:os.system'", ["seed=!!python/name:os.system"],
     "usage", G)
_set("set-deep", "--set value nested 20,000 deep", ["name=" + "[" * 20000], "usage", G)
_set("set-long-path", "--set path of 5,000 parts", [".".join(["a"] * 5000) + "=1"], "usage",
     G)

# --- captures
G = "capture"
_add("capture-ok", "a valid 50-packet capture", ("run", "default", "--json", "--pcap",
     "c.pcap"), "ok", G, files={"c.pcap": GOOD_PCAP})
_add("capture-truncated", "a capture cut inside its last record",
     ("run", "default", "--json", "--pcap", "c.pcap"), "usage", G,
     files={"c.pcap": GOOD_PCAP[:-7]})
_add("capture-truncated-allowed", "the same with --allow-truncated",
     ("run", "default", "--json", "--pcap", "c.pcap", "--allow-truncated"), "ok", G,
     files={"c.pcap": GOOD_PCAP[:-7]})
_add("capture-bad-magic", "a capture with a wrong magic number",
     ("run", "default", "--json", "--pcap", "c.pcap"), "usage", G,
     files={"c.pcap": b"\x00\x01\x02\x03" + GOOD_PCAP[4:]})
_add("capture-empty", "an empty capture file", ("run", "default", "--json", "--pcap",
     "c.pcap"), "usage", G, files={"c.pcap": b""})
_add("capture-header-only", "a capture with no packet", ("run", "default", "--json", "--pcap",
     "c.pcap"), "usage", G, files={"c.pcap": GOOD_PCAP[:24]})
_add("capture-caplen-max", "a record length 0xFFFFFFFF", ("run", "default", "--json",
     "--pcap", "c.pcap"), "usage", G, files={"c.pcap": pcap([(0, 0)], incl=0xFFFFFFFF)})
_add("capture-caplen-zero", "records of length 0", ("run", "default", "--json", "--pcap",
     "c.pcap"), "usage", G, files={"c.pcap": pcap([(0, 0), (0, 1)], incl=0)})
_add("capture-backwards", "timestamps going backwards", ("run", "default", "--json",
     "--pcap", "c.pcap"), "ok", G, files={"c.pcap": pcap([(5, 0), (1, 0), (3, 0)])})
_add("capture-136-years", "two packets 2^32-1 s apart", ("run", "default", "--json",
     "--pcap", "c.pcap"), "either", G, files={"c.pcap": pcap([(0, 0), (0xFFFFFFFF, 0)])})
_add("capture-usec-overflow", "microseconds field 0xFFFFFFFF", ("run", "default", "--json",
     "--pcap", "c.pcap"), "either", G, files={"c.pcap": pcap([(0, 0xFFFFFFFF), (1, 0)])})
_add("capture-dev-zero", "--pcap /dev/zero", ("run", "default", "--json", "--pcap",
     "/dev/zero"), "usage", G)
_add("capture-dir", "--pcap a folder", ("run", "default", "--json", "--pcap", "."), "usage", G)
_add("capture-pcapng-bad-block", "a pcapng block length of 7", ("run", "default", "--json",
     "--pcap", "c.pcapng"), "usage", G, files={"c.pcapng": b"\x0a\x0d\x0d\x0a" +
     struct.pack("<I", 7) + struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + b"\x07\0\0\0"})
_add("capture-in-scenario-dev-zero", "traffic.pcap.file: /dev/zero in a scenario",
     ("run", "s.yaml", "--json"), "usage", G,
     files={"s.yaml": scenario_yaml(traffic={"pcap": {"file": "/dev/zero"}})})

# --- rollback files (`host rollback FILE`); all refused before anything is written
G = "rollback"


def _rb(id, what, content, expect="usage"):
    _add(id, what, ("host", "rollback", "r.json"), expect, G, files={"r.json": content})


_rb("rb-old-superscript", "a step whose old value is \"²\"", rollback_step(old="²"))
_rb("rb-steps-int", "\"steps\": 5", rollback_doc(steps=5))
_rb("rb-steps-map", "\"steps\": {}", rollback_doc(steps={"a": 1}))
_rb("rb-deep", "100,000 nested '['", '{"rxlab_rollback": 1, "steps": ' + "[" * 100000)
_rb("rb-not-json", "not JSON", "this is not json")
_rb("rb-not-utf8", "not UTF-8", b'{"rxlab_rollback": 1, "device": "\xff\xfe"}')
_rb("rb-empty", "an empty file", "")
_rb("rb-list", "a JSON list", "[1, 2, 3]")
_rb("rb-nan", "a step whose old value is NaN", rollback_step(old=float("nan")))
_rb("rb-inf", "a step whose new value is 1e999 (parsed as infinity)",
    rollback_step(new=1).replace('"new": 1', '"new": 1e999'))
_rb("rb-huge-int", "a step whose old value has 5,000 digits", rollback_step(old="9" * 5000))
_rb("rb-kind", "an unknown step kind", rollback_step(kind="rm -rf"))
_rb("rb-target-int", "a step whose target is a number", rollback_step(target=5))
_rb("rb-device-slash", "device \"../etc\"", rollback_doc(device="../etc"))
_rb("rb-device-list", "device [1]", rollback_doc(device=[1]))
_rb("rb-step-extra", "a step with an extra key", rollback_step(extra=1))
_rb("rb-rxfh-weights", "an rxfh step with weights 'abc'",
    rollback_step(kind="rxfh", target="", old={"weights": "abc"}, new={"equal": 2}))
_rb("rb-channels-count", "a channels step with count [1]",
    rollback_step(kind="channels", target="rx", old={"count": [1]}, new=4))
_rb("rb-already", "a valid file already rolled back", rollback_doc())
_rb("rb-format-2", "rollback format 2", rollback_doc(rxlab_rollback=2))
_add("rb-dev-zero", "host rollback /dev/zero", ("host", "rollback", "/dev/zero"), "usage", G)
_add("rb-missing", "host rollback of a missing file", ("host", "rollback", "nope.json"),
     "usage", G)

# --- sweep files
G = "sweep"
_add("sweep-not-utf8", "a sweep file in latin-1", ("sweep", "w.yaml", "--out", "o", "-j", "1",
     "-q"), "usage", G, files={"w.yaml": "name: caf\xe9\n".encode("latin-1")})
_add("sweep-indir-oob", "a sweep point with an RSS table over 9 queues of 4",
     ("sweep", "w.yaml", "--out", "o", "-j", "1", "-q"), "usage", G,
     files={"w.yaml": sweep_yaml({"nic.rss.indirection": [{"equal": 9}]})})
_add("sweep-cpus-empty", "a sweep point with an app on no CPU",
     ("sweep", "w.yaml", "--out", "o", "-j", "1", "-q"), "usage", G,
     files={"w.yaml": sweep_yaml({"apps.0.cpus": [[]]})})
_add("sweep-nan", "a sweep point with a NaN cost",
     ("sweep", "w.yaml", "--out", "o", "-j", "1", "-q"), "usage", G,
     files={"w.yaml": sweep_yaml({"host.costs": [{"stack_rx": float("nan")}]})})

_add("sweep-alias-bomb", "a sweep file that is an alias bomb",
     ("sweep", "w.yaml", "--out", "o", "-j", "1", "-q"), "usage", G,
     files={"w.yaml": BOMB + "name: x\nbase: default\ngrid: {nic.queues: *i}\n"})

# --- other commands
G = "commands"
_add("explain-huge", "explain arfs with 10^18 flows", ("explain", "arfs", "--flows",
     "1000000000000000000", "--rps-flow-cnt", "1099511627776", "--queues", "1000000",
     "--json"), "either", G)
_add("explain-zero", "explain arfs with 0 queues", ("explain", "arfs", "--flows", "1",
     "--rps-flow-cnt", "0", "--queues", "0", "--json"), "usage", G)
_add("hash-bad-key", "hash with a 3-byte key", ("hash", "10.0.0.1", "10.0.0.2", "1", "2",
     "--key", "abcdef", "--json"), "usage", G)
_add("hash-port-huge", "hash with port 70000", ("hash", "10.0.0.1", "10.0.0.2", "70000", "2",
     "--json"), "usage", G)
_add("hash-table-huge", "hash with a 2^40-entry table", ("hash", "10.0.0.1", "10.0.0.2", "1",
     "2", "--table", "4", "--table-size", "1099511627776", "--json"), "usage", G)
_add("reproduce-unknown", "reproduce an unknown experiment", ("reproduce", "nope", "--json"),
     "usage", G)
_add("reproduce-kernel-bad", "reproduce under kernel 'x.y'", ("reproduce", "flow-limit",
     "--quick", "--kernel", "x.y", "--json"), "usage", G)
_add("jobs-zero", "run --seeds 2 --jobs 0", RUN + QUICK + ("--seeds", "2", "--jobs", "0"),
     "usage", G)
_add("seeds-zero", "run --seeds 0", RUN + QUICK + ("--seeds", "0"), "usage", G)
_add("jobs-without-seeds", "run --jobs 2 (worker processes, no replications asked)",
     RUN + QUICK + ("--jobs", "2"), "usage", G)
_add("jobs-cpus-empty", "run --seeds 2 with an app on no CPU", RUN + QUICK + (
     "--seeds", "2", "--set", "apps.0.cpus=[]"), "usage", G)
_add("sweep-jobs-zero", "sweep -j 0", ("sweep", "w.yaml", "--out", "o", "-j", "0", "-q"),
     "usage", G, files={"w.yaml": sweep_yaml({"nic.queues": [1, 2]})})
_add("tune-duration-nan", "tune --duration nan", ("tune", "default", "--duration", "nan",
     "--json"), "usage", G)
_add("tune-cpus-empty", "tune a scenario with an app on no CPU", ("tune", "s.yaml", "--json"),
     "usage", G, files={"s.yaml": scenario_yaml(apps__0__cpus="")})
_add("reproduce-max-memory", "reproduce --max-memory 1MiB", ("reproduce", "flow-limit",
     "--quick", "--max-memory", "1MiB", "--json"), "usage", G)
_add("out-uncreatable", "run --out a folder that cannot be created (/proc/x)",
     RUN + QUICK + ("--out", "/proc/x"), "usage", G)
_add("jobs-out-uncreatable", "run --seeds 2 --out /proc/x", RUN + QUICK + (
     "--seeds", "2", "--out", "/proc/x"), "usage", G)
_add("out-is-file", "run --out an existing file", RUN + QUICK + ("--out", "f"), "usage", G,
     files={"f": "x"})
_add("report-not-sweep", "report on a folder that is not a sweep", ("report", "."), "usage", G)

# --- output folders and files: never replaced, refused in one line (rxlab/outfiles.py)
G = "outfiles"
_add("out-dot", "run --out . (the current folder)", RUN + QUICK + ("--out", "."), "usage", G,
     files={"notes.txt": "mine"})
_add("out-parent", "run --out .. (a folder the current one lies in)",
     RUN + QUICK + ("--out", ".."), "usage", G)
_add("out-root", "run --out /", RUN + QUICK + ("--out", "/"), "usage", G)
_add("out-user-file", "run --out a folder holding a file rxlab did not write",
     RUN + QUICK + ("--out", "res"), "usage", G, files={"res/notes.txt": "mine"})
_add("out-user-file-force", "run --out that folder with --force (rxlab's files beside it)",
     RUN + QUICK + ("--out", "res", "--force"), "ok", G, files={"res/notes.txt": "mine"})
_add("out-force-clash", "run --out --force where the user's own result.json lies",
     RUN + QUICK + ("--out", "res", "--force"), "usage", G,
     files={"res/result.json": "{\"mine\": 1}"})
_add("jobs-out-user-file", "run --seeds 2 --out a folder holding the user's file",
     RUN + QUICK + ("--seeds", "2", "--out", "res"), "usage", G, files={"res/notes.txt": "x"})
_add("compare-out-dot", "compare --out .", ("compare", "--set-variant", "a:kernel.rps_cpus=f",
     "--duration", "0.001", "--seeds", "2", "--json", "--out", "."), "usage", G)
_add("sweep-out-user-file", "sweep --out a folder holding the user's file",
     ("sweep", "w.yaml", "--out", "o", "-j", "1", "-q"), "usage", G,
     files={"w.yaml": sweep_yaml({"nic.queues": [1]}), "o/notes.txt": "mine"})
_add("out-name-max", "run --out a 300-byte name (over NAME_MAX)",
     RUN + QUICK + ("--out", "a" * 300), "usage", G)
_add("out-proc", "run --out /proc/self/x", RUN + QUICK + ("--out", "/proc/self/x"), "usage", G)
_add("tune-o-folder", "tune -o a folder", ("tune", "default", "--json", "-o", "d"), "usage", G,
     files={"d/x": "x"})
_add("report-o-folder", "report -o a folder", ("report", ".", "-o", "d"), "usage", G,
     files={"d/x": "x"})
_add("report-o-proc", "report -o a path under /proc", ("report", ".", "-o", "/proc/x"),
     "usage", G)
_add("report-o-missing-dir", "report -o a file in a folder that does not exist",
     ("report", ".", "-o", "no/r.html"), "usage", G)
_add("calibrate-o-folder", "calibrate -o a folder (refused before the measurement)",
     ("calibrate", "-o", "d"), "usage", G, files={"d/x": "x"})
_add("calibrate-o-dev-null", "calibrate -o /dev/null (a device: never replaced)",
     ("calibrate", "-o", "/dev/null"), "usage", G)
_add("host-export-o-dev-null", "host export -o /dev/null", ("host", "export", "-o",
     "/dev/null"), "usage", G)

# --- numeric arguments: bounded, the limit named; booleans are not numbers
G = "arguments"
_VAR = ("compare", "--set-variant", "a:kernel.rps_cpus=f", "--duration", "0.001", "--json")
_add("compare-seeds-1e9", "compare --seeds 1000000000", _VAR + ("--seeds", "1000000000"),
     "usage", G)
_add("compare-seeds-1e5", "compare --seeds 100000", _VAR + ("--seeds", "100000"), "usage", G)
_add("compare-seed-2-64", "compare --seed 2^64", _VAR + ("--seed", str(1 << 64)), "usage", G)
_add("compare-seed-top", "compare --seed 2^64-1 (its 5 seeds pass 2^64-1)",
     _VAR + ("--seed", str((1 << 64) - 1)), "usage", G)
_add("compare-seed-neg", "compare --seed -1", _VAR + ("--seed", "-1"), "usage", G)
_add("compare-jobs-zero", "compare --jobs 0", _VAR + ("--jobs", "0"), "usage", G)
_add("explain-flows-1e300", "explain arfs --flows 10^300", ("explain", "arfs", "--flows",
     "1" + "0" * 300, "--json"), "usage", G)
_add("explain-kernel-99", "explain arfs --kernel 99.99 (no such release)", ("explain", "arfs",
     "--kernel", "99.99", "--json"), "usage", G)
_add("explain-duration-1e6", "explain drops --duration 1e6", ("explain", "drops", "default",
     "--duration", "1e6", "--json"), "usage", G)
_add("hash-v6-table-0", "hash of IPv6 addresses with --table 0", ("hash", "2001:db8::1",
     "2001:db8::2", "1", "2", "--table", "0", "--json"), "usage", G)
_add("hash-v6-table-40", "hash of IPv6 addresses with --table 40", ("hash", "2001:db8::1",
     "2001:db8::2", "1", "2", "--table", "40", "--json"), "ok", G)
_add("hash-v6-within-0", "hash --to-queue varying an IPv6 address over ::/0 (2^128 values)",
     ("hash", "2001:db8::1", "2001:db8::2", "1", "2", "--table", "40", "--to-queue", "39",
      "--vary", "dst", "--within", "::/0", "--json"), "ok", G)
_add("hash-key-empty", "hash --key '' (empty)", ("hash", "10.0.0.1", "10.0.0.2", "1", "2",
     "--key", "", "--json"), "usage", G)
_set("set-duration-true", "--set duration=true (a boolean as seconds)", ["duration=true"],
     "usage", G, quick=False)
_set("set-queues-true", "--set nic.queues=true (a boolean as a count)", ["nic.queues=true"],
     "usage", G)
_set("set-flows-false", "--set traffic.groups.0.flows=false",
     ["traffic.groups.0.flows=false"], "usage", G)
_set("rps-cpus-bool-key", "kernel.rps_cpus keyed by a boolean ({true: f})",
     ["kernel.rps_cpus={true: f}"], "usage", G)
_set("indir-empty", "an empty indirection table []", ["nic.rss.indirection=[]"], "usage", G)

# ------------------------------------------------------------------ proven elsewhere

SIGNALS = "tests/test_host_signals.py"
LOCK = "tests/test_sweep_lock.py"
OUTFILES = "tests/test_output_files.py"
ARTIFACTS = "tests/test_artifacts_hostile.py"
DELEGATED = [
    Delegated("apply-sigint-sigterm", "host apply --yes interrupted by SIGINT or SIGTERM at "
              "every step of a 13-step plan in a network namespace: the host is as before, "
              "exit 130/143 with one line",
              f"{SIGNALS}::test_interrupted_apply_leaves_the_host_as_before", "host apply"),
    Delegated("apply-signal-after-write", "a signal right after a write: that step is undone "
              "too", f"{SIGNALS}::test_a_signal_after_a_write_undoes_that_step_too",
              "host apply"),
    Delegated("apply-sigkill", "SIGKILL leaves the rollback file in \"applying\"; the next "
              "host apply or host show says so",
              f"{SIGNALS}::test_sigkill_leaves_applying_which_show_and_apply_report",
              "host apply"),
    Delegated("apply-rollback-fails", "a rollback that fails names the rollback file and the "
              "command that finishes it",
              f"{SIGNALS}::test_a_rollback_that_fails_names_the_file_and_the_command",
              "host apply"),
    Delegated("sweep-lock", "two sweeps (or --resume) on one output folder: the second is "
              "refused with one line, exit 2",
              f"{LOCK}::test_second_sweep_and_resume_on_a_busy_folder_are_refused", "sweeps"),
    Delegated("sweep-lock-holder", "the folder lock names its holder and dies with it",
              f"{LOCK}::test_lock_is_exclusive_names_its_holder_and_dies_with_it", "sweeps"),
    Delegated("sweep-other-folder", "another sweep's folder is refused unless replaced",
              f"{LOCK}::test_another_sweeps_folder_is_refused_unless_replaced", "sweeps"),
    Delegated("sweep-orphans", "SIGTERM or SIGKILL of the sweep driver leaves no process",
              f"{LOCK}::test_killed_driver_leaves_no_process", "sweeps"),
    Delegated("out-refused-intact", "--out a folder with the user's file, ., .., a symlink or "
              "a dangling one (run, run --seeds, compare): one line, exit 2, the folder "
              "byte for byte as before",
              f"{OUTFILES}::test_refused_out_leaves_the_folder_as_it_was", "output files"),
    Delegated("o-char-device", "-o onto a character device made with mknod (report, tune, "
              "calibrate, host export): refused, still the same device",
              f"{OUTFILES}::test_o_onto_a_character_device_leaves_it_a_device", "output files"),
    Delegated("full-disk", "a full 64 KiB tmpfs under run --out, run --seeds --out, compare "
              "--out, sweep --out, host export -o: one line, exit 1, nothing half-written",
              f"{OUTFILES}::test_a_full_disk_is_one_line_and_nothing_half_written",
              "output files"),
    Delegated("read-only", "a read-only file system under run --out, host export -o, sweep "
              "--out, tune -o: one line, exit 1, nothing written",
              f"{OUTFILES}::test_a_read_only_file_system_is_one_line_exit_1", "output files"),
    Delegated("path-refusals", "-o and --out through a symlink loop, a 300-byte name, /proc, "
              "/sys: one line, exit 2, the folder as before",
              f"{OUTFILES}::test_the_file_systems_refusals_of_the_users_path_are_exit_2",
              "output files"),
    Delegated("stdout-dev-full", "/dev/full as standard output: one line, exit 1",
              f"{OUTFILES}::test_dev_full_as_stdout_is_one_line", "output files"),
    Delegated("closed-pipe", "a closed pipe as standard output (rxlab run | head): exit 0, "
              "nothing on stderr", f"{OUTFILES}::test_a_closed_pipe_exits_0_quietly",
              "output files"),
    Delegated("compare-same-names", "compare a/x.yaml b/x.yaml x#2.yaml: x, x#3, x#2, every "
              "figure under the configuration that produced it",
              f"{OUTFILES}::test_compare_names_are_unique_and_each_figure_is_its_own",
              "output files"),
    Delegated("saved-result-damaged", "explain on a saved result.json without latency_ns or "
              "a CPU's util, a string for an object, config/apps null, queues an int, an "
              "empty CPU, a CPU out of range, a share of 9.98, NaN, 100,000 nested arrays, a "
              "FIFO, /dev/zero: one line naming the file and field, exit 2",
              f"{ARTIFACTS}::test_explain_on_a_damaged_result_is_one_line", "saved artifacts"),
    Delegated("saved-scenario-replay", "a saved scenario.yaml changed to 3600 s, to another "
              "duration, to 100x the packets: the replay is not run (or stopped at the "
              "result's packets) and the note says why",
              f"{ARTIFACTS}::test_a_tampered_scenario_is_not_replayed_past_the_result",
              "saved artifacts"),
    Delegated("sweep-folder-damaged", "report on results.parquet cut, zeroed, garbage, empty, "
              "a FIFO, a metric as text; a run file with bad metrics/params/point, nested "
              "100,000 deep, a FIFO; sweep.json nested 100,000 deep or with bad lists: one "
              "line naming the file, exit 2, no page written",
              f"{ARTIFACTS}::test_report_on_a_damaged_sweep_folder_is_one_line",
              "saved artifacts"),
    Delegated("cache-damaged", "a numba cache file (data or index) truncated, zeroed, emptied "
              "or garbage: removed and compiled again, the run succeeds",
              f"{ARTIFACTS}::test_a_damaged_cache_entry_is_removed_and_compiled_again",
              "compile cache"),
    Delegated("cache-damaged-loop", "the event loop's cached index and shaping code truncated: "
              "rxlab run says it compiles them again and gives the clean result",
              f"{ARTIFACTS}::test_a_truncated_loop_cache_file_recompiles_and_the_run_succeeds",
              "compile cache"),
    Delegated("cache-unwritable", "a cache folder that cannot be written: compiled in memory, "
              "no numba file written into rxlab/** or anywhere",
              f"{ARTIFACTS}::test_an_unwritable_cache_folder_compiles_in_memory_and_writes_"
              "nothing_in_the_tree", "compile cache"),
    Delegated("cache-prune-user-file", "cache --prune --yes beside a key folder holding the "
              "user's notes.txt or a symlink: that folder kept and named",
              f"{ARTIFACTS}::test_cache_prune_keeps_a_folder_holding_a_users_file",
              "compile cache"),
    Delegated("cpu-time-short-capture", "a one-packet capture and a 2 us burst (irq 300.0, "
              "system 433.0 before): per CPU, shares in [0, 1] summing to 1",
              f"{ARTIFACTS}::test_short_captures_give_shares_that_sum_to_one", "CPU time"),
    Delegated("cpu-time-max-costs", "user_ns, stage costs and cost jitter at their maxima "
              "without drain (user 200.0 before): shares in [0, 1] summing to 1",
              f"{ARTIFACTS}::test_maximal_costs_give_shares_that_sum_to_one", "CPU time"),
    Delegated("cpu-time-checked", "every run checks CPU time as it checks packets: a CPU "
              "over full is an internal error (exit 3) with the figures",
              f"{ARTIFACTS}::test_a_cpu_over_full_is_an_internal_error_with_the_figures",
              "CPU time"),
    Delegated("sweep-sigint-100000", "SIGINT (SIGTERM) to a sweep of 100,000 runs: exit 130 "
              "(143) within 5 s, one line, no process left",
              f"{ARTIFACTS}::test_sigint_ends_a_sweep_of_100000_runs_within_5_s", "signals"),
    Delegated("name-escaped", "a scenario named with an ANSI escape and a bell, a C1 CSI, a "
              "newline, a lone surrogate, rich markup '[/]': run and explain show it "
              "escaped, --json keeps it",
              f"{ARTIFACTS}::test_a_hostile_scenario_name_is_escaped_on_the_terminal",
              "terminal"),
    Delegated("error-escaped", "an error naming a path with an ESC and a newline: one line, "
              "escaped", f"{ARTIFACTS}::test_an_error_line_escapes_control_characters",
              "terminal"),
    Delegated("locale-ascii", "PYTHONIOENCODING=ascii: run, a non-ASCII name, explain, list: "
              "exit 0, ASCII output", f"{ARTIFACTS}::test_an_ascii_locale_works", "terminal"),
    Delegated("sweep-name-surrogate", "a sweep named with a lone surrogate and an ESC: the "
              "progress bar and the HTML report show it escaped",
              f"{ARTIFACTS}::test_a_sweep_named_with_a_surrogate_and_an_escape_reports",
              "terminal"),
]


# ------------------------------------------------------------------ running and judging


@dataclass
class Outcome:
    rc: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float


def _limit(mem: int):
    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()  # a timeout kills the whole group (sweep workers too)
    return pre


def run_cli(argv, cwd, timeout: float = TIMEOUT_S, mem: int = MEM_LIMIT,
            env: dict | None = None) -> Outcome:
    """``rxlab ARGV`` in ``cwd`` under a memory limit and a timeout."""
    cmd = [sys.executable, "-m", "rxlab.cli.main", *argv]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=_limit(mem), env=env)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = None
    return Outcome(rc, out.decode(errors="replace"), err.decode(errors="replace"),
                   time.monotonic() - t0)


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _bad_number(obj, where="") -> str | None:
    """A negative latency or mean anywhere in the result, as 'path = value'."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{where}.{k}" if where else str(k)
            if "latency" in str(k) and isinstance(v, (int, float)) and v < 0:
                return f"{p} = {v}"
            if "latency" in where and isinstance(v, (int, float)) and v < 0:
                return f"{p} = {v}"
            bad = _bad_number(v, p)
            if bad:
                return bad
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad = _bad_number(v, f"{where}[{i}]")
            if bad:
                return bad
    return None


def _last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:200] if lines else "(nothing printed)"


def judge(expect: str, out: Outcome, timeout: float = TIMEOUT_S) -> tuple[str, str]:
    """('ok' | 'usage' | 'FAIL', one-line detail)."""
    if out.rc is None:
        return "FAIL", f"hang: killed after {timeout:.0f} s"
    if out.rc < 0:
        return "FAIL", f"killed by {signal.Signals(-out.rc).name}"
    if out.rc == 0:
        try:
            data = json.loads(out.stdout, parse_constant=_no_constant)
        except ValueError as err:
            return "FAIL", f"exit 0, stdout is not valid JSON ({str(err)[:80]})"
        pk = data.get("packets") if isinstance(data, dict) else None
        if isinstance(pk, dict) and "offered" in pk:
            rest = sum(pk.get(k, 0) for k in ("delivered", "dropped", "forwarded", "in_flight"))
            if pk["offered"] != rest:
                return "FAIL", f"exit 0, packets not conserved ({pk})"
        bad = _bad_number(data)
        if bad:
            return "FAIL", f"exit 0, nonsense in the result: {bad}"
        if expect == "usage":
            return "FAIL", "exit 0 with a result; expected a one-line refusal"
        return "ok", "exit 0, valid JSON"
    lines = [x for x in out.stderr.splitlines() if not x.startswith(COMPILE_NOTICE)]
    if out.rc == 2:
        if len(lines) != 1 or not lines[0].startswith("rxlab: error:"):
            return "FAIL", f"exit 2 with {len(lines)} stderr lines: {out.stderr[:200]!r}"
        if "unrecognized arguments" in lines[0] or "invalid choice" in lines[0]:
            return "FAIL", f"the command line itself was refused: {lines[0][:200]}"
        if expect == "ok":
            return "FAIL", f"refused; expected a result: {lines[0][:200]}"
        return "usage", lines[0][:400]
    return "FAIL", f"exit {out.rc}: {_last_line(out.stderr)}"


def write_files(folder: Path, files: dict) -> None:
    for name, content in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)  # "res/notes.txt": a folder with a file
        if isinstance(content, str):
            content = content.encode()
        p.write_bytes(content)


def run_case(case: Case) -> tuple[str, str, float]:
    """(verdict, detail, seconds) for one case, in a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="rxlab-hostile-") as tmp:
        write_files(Path(tmp), case.files)
        out = run_cli(case.argv, tmp, case.timeout)
    verdict, detail = judge(case.expect, out, case.timeout)
    return verdict, detail, out.seconds


def run_all(cases: list[Case] | None = None, workers: int = 2, progress=None) -> dict:
    """Run cases in a small pool; {case id: (verdict, detail, seconds)}."""
    cases = CASES if cases is None else cases
    results = {}
    with ThreadPoolExecutor(workers) as pool:
        futs = {c.id: pool.submit(run_case, c) for c in cases}
        for c in cases:
            results[c.id] = futs[c.id].result()
            if progress:
                progress(c, results[c.id])
    return results


def argv_text(case: Case) -> str:
    """The command line as a user would type it (files named as written)."""
    import shlex

    return "rxlab " + " ".join(shlex.quote(a) if len(a) < 60 else shlex.quote(a[:40]) + "..."
                               for a in case.argv)


def _check_ids() -> None:
    ids = [c.id for c in CASES] + [d.id for d in DELEGATED]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"


_check_ids()
