"""Fuzz: generated scenarios, ``--set`` paths and values, captures and rollback files.

Four generators (hypothesis, derandomized: the same cases on every run):

* ``scenario``: built-in and richer scenarios with 1-3 fields replaced; the fields and
  their values come from walking the real pydantic models (``rxlab.scenario.Scenario``
  and its sub-models: ints, floats, strings, literals, lists, mappings), mixed with
  hostile values (0, -1, 2^63, 1e-300, NaN, infinity, strings, nested lists and maps,
  unknown keys).
* ``set``: ``--set PATH=VALUE`` with paths from the default scenario's dumped keys plus
  bad paths, values as YAML text (numbers, NaN, tags, unclosed brackets, deep nesting).
* ``capture``: valid pcap / nanosecond pcap / pcapng files with record lengths, block
  lengths, timestamps and bytes overwritten, truncated or repeated.
* ``rollback``: rollback files with fields replaced by hostile values or the text cut.

Each case runs in-process in a child process (under an address-space limit, so a
segfault or a blowup fails the test instead of killing pytest): validation, then for an
accepted scenario, ``--set`` or capture a short simulation whose result must be JSON
without NaN or Infinity, conserve packets and have no negative latency; the rollback-file
loader (which never writes) for rollback files. Anything but success or a one-line
``UsageError`` is a failure. A sample of the accepted cases then goes through the real CLI
(``hostile_cases.judge``). The counts are printed in the test log.

Run one generator by hand: ``python tests/test_fuzz_cli.py scenario 700`` (the cases CI
runs), or with a third argument, a seed, for other cases.
"""

from __future__ import annotations

import copy
import json
import math
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import traceback
import typing
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from support import hostile_cases as H  # noqa: E402

EXAMPLES = {"scenario": 700, "set": 400, "capture": 300, "rollback": 300}
CLI_SAMPLE = {"scenario": 16, "set": 10, "capture": 6}  # cases through the real CLI
CHILD_MEM = 4 << 30
CHILD_TIMEOUT = 900
CASE_ALARM_S = 30  # one in-process case longer than this is a hang

# ------------------------------------------------------------------ hostile values

INTS = [0, 1, -1, 2, 3, 7, 8, 64, 255, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1,
        2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63), 10**30]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-9, 1e-300, 5e-324, 1e-12, 1e6, 1e9, 1e18, 1e300,
          1.7976931348623157e308, math.inf, -math.inf, math.nan]
STRS = ["", " ", "0", "-1", "0-3", "3-1", "0-", "-", ",", "1,,2", "0-4294967295", "ff",
        "0x", "zz", "f" * 300, "²", "٣", "default", "all", "none", "/dev/zero", "/",
        "../../etc/passwd", "a\nb", "\x00", "\u2028", "🙂", "1e999", "nan", "inf", "true",
        "[", "{", "!!python/object:os.system", "6.19", "5.15", "99.99", "x" * 5000]


def _strategies():
    from hypothesis import strategies as st

    scalar = st.one_of(
        st.sampled_from(INTS), st.integers(-(2**70), 2**70), st.integers(-5, 5000),
        st.sampled_from(FLOATS), st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(STRS), st.text(max_size=20), st.booleans(), st.none())
    hostile = st.recursive(
        scalar,
        lambda kids: st.one_of(st.lists(kids, max_size=5),
                               st.dictionaries(st.one_of(st.text(max_size=8),
                                                         st.sampled_from(INTS[:6])),
                                               kids, max_size=4)),
        max_leaves=12)
    return st, scalar, hostile


def values_for(ann, st, hostile, depth=0):
    """A strategy for values of a pydantic field annotation, hostile ones mixed in."""
    from pydantic import BaseModel

    origin, args = typing.get_origin(ann), typing.get_args(ann)
    typed = None
    if ann is bool:
        typed = st.booleans()
    elif ann is int:  # plausible small values reach the loop; the rest probe the checks
        typed = st.one_of(st.integers(0, 16), st.integers(0, 16), st.sampled_from(INTS),
                          st.integers(-3, 70000))
    elif ann is float:
        typed = st.one_of(st.floats(0, 2), st.floats(0, 2), st.sampled_from(FLOATS),
                          st.floats(-1e7, 1e7), st.floats(allow_nan=True, allow_infinity=True))
    elif ann is str:
        typed = st.one_of(st.sampled_from(STRS), st.text(max_size=12))
    elif origin is typing.Literal:
        typed = st.one_of(st.sampled_from(args), st.sampled_from(STRS))
    elif origin is typing.Annotated:
        return values_for(args[0], st, hostile, depth)
    elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        opts = [values_for(a, st, hostile, depth) for a in args if a is not type(None)]
        typed = st.one_of(st.none(), *opts)
    elif origin is list and depth < 2:
        item = values_for(args[0], st, hostile, depth + 1) if args else hostile
        typed = st.one_of(st.lists(item, max_size=6), st.lists(item, min_size=200,
                                                                max_size=300))
    elif origin is dict and depth < 2:
        keys = [st.sampled_from(STRS), st.text(max_size=6), st.sampled_from(INTS[:8])]
        if args and typing.get_origin(args[0]) is typing.Literal:
            keys.insert(0, st.sampled_from(typing.get_args(args[0])))
        k = st.one_of(*keys)  # hashable, as YAML mapping keys are
        v = values_for(args[1], st, hostile, depth + 1) if args else hostile
        typed = st.dictionaries(k, v, max_size=4)
    elif isinstance(ann, type) and issubclass(ann, BaseModel) and depth < 2:
        names = [f.alias or n for n, f in ann.model_fields.items()]
        typed = st.dictionaries(st.one_of(st.sampled_from(names), st.text(max_size=6)),
                                hostile, max_size=4)
    if typed is None:
        return hostile
    return st.one_of(typed, typed, typed, hostile)  # mostly the field's own type


def schema_paths() -> dict[str, object]:
    """Dotted paths of every field of the scenario schema ('N' for a list index)
    -> its annotation."""
    from pydantic import BaseModel

    from rxlab.scenario import Scenario

    out: dict[str, object] = {}

    def models_in(ann):
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield "", ann
        elif origin is list:
            for _, m in models_in(args[0]):
                yield "N.", m
        elif origin is not None:
            for a in args:
                yield from models_in(a)

    def walk(model, prefix, seen):
        for name, f in model.model_fields.items():
            p = prefix + (f.alias or name)
            out[p] = f.annotation
            for mid, sub in models_in(f.annotation):
                if (sub, p) not in seen and p.count(".") < 6:
                    walk(sub, p + "." + mid, seen | {(sub, p)})

    walk(Scenario, "", frozenset())
    return out


def _flat(data, prefix="") -> list[str]:
    """Every dotted path (inner nodes too) of a dumped scenario."""
    out = []
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return out
    for k, v in items:
        p = f"{prefix}{k}"
        out.append(p)
        out += _flat(v, p + ".")
    return out


def _norm(path: str) -> str:
    return ".".join("N" if p.isdigit() else p for p in path.split("."))


# ------------------------------------------------------------------ base scenarios


def base_scenarios() -> dict[str, dict]:
    """Valid starting points: the built-ins and two that use most sections."""
    out = {n: yaml.safe_load((H.ROOT / "rxlab" / "scenarios" / f"{n}.yaml").read_text())
           for n in ("default", "cpumap")}
    rich = copy.deepcopy(out["default"])
    rich.update(duration=0.01, drain=0.005)
    rich["host"].update(costs={"stack_rx": 400.0},
                        cost_jitter={"dist": "lognormal", "cv": 0.3})
    rich["nic"].update(
        irq_affinity=[0, 1, 2, 3], rx_usecs=8.0, max_pps=5e6,
        rss={"table_size": 128, "indirection": {"weight": [1, 2, 1, 1]},
             "flow_hash": {"udp4": "sdfn"}, "contexts": [{"id": 1, "indirection":
                                                          {"equal": 2}}]},
        ntuple=[{"match": {"proto": "udp", "dst_port": 9001}, "queue": 1},
                {"match": {"proto": "tcp"}, "context": 1}],
        arfs={"model": "ice-hash-match", "capacity": 512, "delay_us": 20.0},
        napi_defer_hard_irqs={1: 2, 2: 3}, gro_flush_timeout={1: 20000, 2: 50000})
    rich["kernel"].update(rps_cpus={0: "e", 1: "d"}, rps_sock_flow_entries=4096,
                          rps_flow_cnt=256, flow_limit_cpu_bitmap="f",
                          hashrnd="0123456789abcdef0123456789abcdef", busy_read=5)
    rich["traffic"]["groups"].append(
        {"name": "tcp6", "flows": 8, "proto": "tcp", "ip": 6,
         "src": {"list": ["2001:db8::1", "2001:db8::2"]}, "dst": {"addr": "2001:db8::ff"},
         "sport": {"sequential": 40000}, "dport": {"value": 9001},
         "rate": {"pps": 20000, "per_flow": "explicit", "weights": [1, 2, 3, 4, 5, 6, 7, 8]},
         "arrivals": {"process": "onoff", "on_s": 0.001, "off_s": 0.001},
         "size": {"choices": [64, 1518], "weights": [3, 1]}, "start": 0.001, "stop": 0.008})
    rich["apps"] = [
        {"name": "a", "cpus": "0-1", "groups": ["clients"], "cost": {"user_ns": 100},
         "migrate": [{"at": 0.002, "cpu": 2}], "rcvbuf": 65536, "batch": 4,
         "busy_poll": 20, "prefer_busy_poll": True, "busy_poll_budget": 4},
        {"name": "b", "cpus": [2, 3], "groups": ["tcp6"], "spread": "round_robin",
         "migrate": {"every_s": 0.003, "cpus": "0-3"}, "connected": False}]
    rich["metrics"] = {"interval": 0.001, "warmup": 0.002}
    out["rich"] = rich
    xdp = copy.deepcopy(out["default"])
    xdp.update(duration=0.005)
    xdp["nic"]["irq_affinity"] = [0, 1, 2, 3]
    xdp["xdp"] = {"rules": [{"match": {"rx_queue": 0, "proto": "udp"}, "action": "pass"},
                            {"match": {"src_port": 1024}, "action": "drop"},
                            {"match": {"rx_queue": 1}, "action": "redirect-xsk"}],
                  "default": "pass", "hash_metadata": True}
    xdp["apps"].append({"name": "xsk", "cpus": 1, "batch": 64,
                        "afxdp": {"queues": [1], "rx_ring": 1024, "umem_frames": 2048}})
    out["xdp"] = xdp
    return out


def set_in(data, path: str, value) -> bool:
    """Put ``value`` at a dotted path, making sections and list entries on the way;
    False if the path leads through a value."""
    parts = path.split(".")
    node = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt_is_index = not last and parts[i + 1].isdigit()
        if isinstance(node, list):
            if not part.isdigit():
                return False
            k = int(part)
            while len(node) <= k and len(node) < 4:
                node.append([] if nxt_is_index else {})
            if k >= len(node):
                return False
        elif isinstance(node, dict):
            k = int(part) if part.isdigit() and int(part) in node else part
            if not last and not isinstance(node.get(k), (dict, list)):
                node[k] = [] if nxt_is_index else {}
        else:
            return False
        if last:
            node[k] = value
        else:
            node = node[k]
    return True


# ------------------------------------------------------------------ captures and rollbacks


def _ng_block(btype: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def pcapng(times_us: list[int]) -> bytes:
    shb = _ng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = _ng_block(1, struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 9, 1) + bytes([6, 0,
                    0, 0]) + struct.pack("<HH", 0, 0))
    epbs = []
    for i, t in enumerate(times_us):
        fr = H._udp_frame(2000 + i % 5, 9000)
        epbs.append(_ng_block(6, struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(fr),
                                             len(fr)) + fr))
    return shb + idb + b"".join(epbs)


CAPTURES = {
    "pcap": H.pcap([(0, i * 37) for i in range(12)]),
    "pcap-ns": H.pcap([(0, i * 3700) for i in range(12)], magic=0xA1B23C4D),
    "pcapng": pcapng([i * 50 for i in range(12)]),
}
U32_VALUES = [0, 1, 3, 11, 12, 13, 63, 64, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC,
              262144, 262145, 1 << 26, (1 << 26) + 4]


def mutate_capture(data: bytes, muts: list) -> bytes:
    b = bytearray(data)
    for kind, pos, val in muts:
        if not b:
            break
        pos %= len(b)
        if kind == "u32":
            b[pos:pos + 4] = struct.pack("<I", val & 0xFFFFFFFF)
        elif kind == "byte":
            b[pos] = val & 0xFF
        elif kind == "cut":
            del b[pos:]
        elif kind == "repeat":
            b[pos:pos] = b[pos:pos + (val % 200) + 1]
        elif kind == "insert":
            b[pos:pos] = bytes([val & 0xFF]) * ((val >> 8) % 64 + 1)
    return bytes(b)


def rollback_base() -> dict:
    return {"rxlab_rollback": 1, "created": "2025-01-01T00:00:00+00:00",
            "device": "rxlabnone0", "netns": None, "state": "rolled-back",
            "steps": [
                {"kind": "sysctl", "target": "netdev_max_backlog", "old": "1000",
                 "new": "2000"},
                {"kind": "rps_cpus", "target": "rx-0", "old": "0", "new": "e"},
                {"kind": "rps_flow_cnt", "target": "rx-1", "old": "0", "new": "256"},
                {"kind": "irq", "target": "45", "old": "0-3", "new": "1"},
                {"kind": "channels", "target": "combined", "old": 8, "new": 4},
                {"kind": "rxfh", "target": "", "old": {"equal": 8}, "new": {"weights":
                                                                           [1, 1, 2, 2]}},
                {"kind": "flow_hash", "target": "udp4", "old": "sd", "new": "sdfn"}]}


# ------------------------------------------------------------------ in-process checks


SHORT_S = 0.002  # simulated traffic per accepted case (a changed duration is kept if shorter)


def simulate_checked(sc) -> None:
    """Run an accepted scenario briefly: the result must be valid JSON without NaN or
    Infinity and without a negative latency (simulate itself checks conservation)."""
    from rxlab.simulate import simulate

    if sc.duration > SHORT_S:
        sc = sc.model_copy(update={"duration": SHORT_S})
    data = json.loads(simulate(sc).to_json(), parse_constant=H._no_constant)
    bad = H._bad_number(data)
    if bad:
        raise AssertionError(f"nonsense in the result: {bad}")


def check(fn) -> str | None:
    """None if ``fn`` returns or raises a one-line UsageError; else the failure."""
    from rxlab.errors import UsageError

    def alarm(*_):
        raise TimeoutError(f"still running after {CASE_ALARM_S} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(CASE_ALARM_S)
    try:
        fn()
    except UsageError as err:
        msg = str(err)
        if not msg.strip() or len(msg.splitlines()) != 1:
            return f"UsageError of {len(msg.splitlines())} lines: {msg[:300]!r}"
        return None
    except Exception as err:  # noqa: BLE001 - any other exception is the finding
        frames = traceback.extract_tb(err.__traceback__)
        where = next((f for f in reversed(frames) if "/rxlab/" in f.filename), frames[-1])
        short = where.filename.split("/rxlab/")[-1]
        return (f"{type(err).__name__}: {' '.join(str(err).split())[:240]} "
                f"(rxlab/{short}:{where.lineno} in {where.name})")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return None


def _yaml_text(v) -> str:
    text = yaml.safe_dump(v, default_flow_style=True, width=10**9, allow_unicode=True).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def fuzz(kind: str, n: int, seed: int | None = None) -> dict:
    """Run ``n`` generated cases of one kind in this process; the report as a dict.
    ``seed``: other cases than the fixed ones CI runs (a search by hand)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from rxlab.capture.pcap import open_capture
    from rxlab.cli.run_cmd import parse_sets
    from rxlab.host.apply import load_rollback
    from rxlab.scenario import load_scenario, scenario_from_dict, with_overrides

    st, scalar, hostile = _strategies()
    report = {"kind": kind, "cases": 0, "accepted": 0, "failures": [], "sample": []}
    tmp = Path(tempfile.mkdtemp(prefix=f"rxlab-fuzz-{kind}-"))
    candidates: list[H.Case] = []  # accepted cases: the ones that reach the event loop

    def record(case_text: str, failure: str | None, accepted: bool, cli: H.Case | None):
        report["cases"] += 1
        report["accepted"] += accepted
        if failure:
            report["failures"].append({"case": case_text, "error": failure})
        elif accepted and cli is not None:
            candidates.append(cli)

    def outcome(text: str, accept, run=None):
        """Validate (``accept`` returns the scenario or None), then run it briefly."""
        print(f"case {report['cases'] + 1}: {text[:400]}", file=sys.stderr, flush=True)
        got = []
        failure = check(lambda: got.append(accept()))
        if failure is None and got and run is not None and got[0] is not None:
            failure = check(lambda: run(got[0]))
        return failure, bool(got)

    cfg = settings(max_examples=n, derandomize=seed is None, database=None, deadline=None,
                   phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                   print_blob=False)

    if kind == "scenario":
        bases = base_scenarios()
        schema = schema_paths()
        zero = sorted({".".join("0" if s == "N" else s for s in p.split(".")) for p in schema})
        own = {b: _flat(d) for b, d in bases.items()}  # the fields each base sets
        bad = ["nic.queuez", "traffic.groups.7.flows", "apps.0.cpus.x", "x", "host.cpus.0"]

        @st.composite
        def mutations(draw):
            """A base and 1-3 (path, value): mostly fields the base sets, then any field
            of the schema, now and then a path that is not one."""
            base = draw(st.sampled_from(sorted(bases)))
            out = []
            for _ in range(draw(st.integers(1, 3))):
                p = draw(st.one_of(*[st.sampled_from(own[base])] * 6,
                                   st.sampled_from(zero), st.sampled_from(zero),
                                   st.sampled_from(bad)))
                ann = schema.get(_norm(p))
                out.append((p, draw(values_for(ann, st, hostile) if ann is not None
                                    else hostile)))
            return base, out

        @cfg
        @given(mutations())
        def one(case):
            base, muts = case
            data = copy.deepcopy(bases[base])
            applied = [(p, v) for p, v in muts if set_in(data, p, v)]
            text = f"base {base}; " + "; ".join(f"{p} = {_yaml_text(v)}" for p, v in applied)
            failure, ok = outcome(text, lambda: scenario_from_dict(data, "fuzz"),
                                  simulate_checked)
            try:
                body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()
            except Exception:  # noqa: BLE001 - not expressible as YAML: in-process only
                body = None
            cli = None if body is None else H.Case(
                f"fuzz-scenario-{report['cases']}", text, ("run", "s.yaml", "--json",
                                                           "--duration", "0.001"),
                "either", "fuzz", {"s.yaml": body})
            record(text, failure, ok, cli)

    elif kind == "set":
        base = load_scenario("default")
        dumped = _flat(base.model_dump(mode="python", exclude_none=True))
        bad = ["", ".", "a..b", "apps.x", "apps.99.cpus", "apps.-1.cpus", "duration.x",
               "nic.queues.0", "traffic.groups.0.rate.pps.x", "name.0", "nic.queuez",
               "host.costs.stack_rx", "kernel.rps_cpus.0", "kernel.rps_flow_cnt.3",
               "nic.arfs.delay_us", "xdp.rules.0.action", "cpumap.cpus", "ключ", "a\tb",
               ".".join(["apps"] * 40), "traffic.groups.0.rate.weights.0"]
        texts = st.one_of(
            scalar.map(_yaml_text), hostile.map(_yaml_text), st.sampled_from(STRS),
            st.text(max_size=30), st.sampled_from(
                ["[unclosed", "{", "}", "!!python/object/apply:os.getcwd []", "&a [*a]",
                 ": :", "1e400", ".nan", "-.inf", "0x10", "0o17", "1_000", "~", "", "yes",
                 "[" * 3000, "{a: " * 500, "*x", "!!binary AAAA", "? a", "- 1\n- 2",
                 "{equal: 9}", "{weight: [1,1,1,1,1,1,1,1]}", "[]", "\"\"", "3-1"]))

        schema = schema_paths()

        @st.composite
        def item(draw):
            """PATH and VALUE text: mostly a dumped path with a value of its field's type,
            else bad paths, random text and hostile YAML."""
            p = draw(st.one_of(*[st.sampled_from(dumped)] * 4, st.sampled_from(bad),
                               st.text(max_size=15)))
            ann = schema.get(_norm(p))
            typed = values_for(ann, st, hostile).map(_yaml_text) if ann is not None else texts
            return p, draw(st.one_of(typed, typed, texts))

        @cfg
        @given(st.lists(item(), min_size=1, max_size=3))
        def one(items):
            sets = [f"{p}={v}" for p, v in items]
            text = " ".join(f"--set {json.dumps(s, ensure_ascii=False)}" for s in sets)
            failure, ok = outcome(text, lambda: with_overrides(base, parse_sets(sets)),
                                  simulate_checked)
            argv = ["run", "default", "--json", "--duration", "0.001"]
            for s in sets:
                argv += ["--set", s]
            cli = None if any("\x00" in s for s in sets) else H.Case(
                f"fuzz-set-{report['cases']}", text, tuple(argv), "either", "fuzz")
            record(text, failure, ok, cli)

    elif kind == "capture":
        pcap_base = load_scenario("default")
        mut = st.tuples(st.sampled_from(["u32", "u32", "byte", "cut", "repeat", "insert"]),
                        st.integers(0, 4000),
                        st.one_of(st.sampled_from(U32_VALUES), st.integers(0, 2**32 - 1)))

        @cfg
        @given(st.sampled_from(sorted(CAPTURES)), st.lists(mut, min_size=1, max_size=4),
               st.sampled_from([1.0, 1.0, 1e-6, 1e6]))
        def one(fmt, muts, speed):
            data = mutate_capture(CAPTURES[fmt], muts)
            path = tmp / "c.pcap"
            path.write_bytes(data)
            text = f"{fmt} {muts} speedup {speed}"

            def parse():
                cap = open_capture(path, speedup=speed)
                for _ in cap.chunks(4096):
                    pass
                return with_overrides(pcap_base, {"traffic": {"pcap": {
                    "file": str(path), "speedup": speed}}, "duration": cap.duration_s})
            failure, ok = outcome(text, parse, simulate_checked)
            cli = H.Case(f"fuzz-capture-{report['cases']}", text,
                         ("run", "default", "--json", "--pcap", "c.pcap", "--speedup",
                          repr(speed)), "either", "fuzz", {"c.pcap": data})
            record(text, failure, ok, cli)

    elif kind == "rollback":
        base = rollback_base()
        paths = sorted(_flat(base))

        top = ["rxlab_rollback", "device", "netns", "steps", "steps.0", "created"]
        values = st.one_of(scalar, scalar, st.sampled_from(STRS), hostile)

        @cfg
        @given(st.lists(st.tuples(st.one_of(st.sampled_from(paths), st.sampled_from(top)),
                                  values), min_size=1, max_size=3),
               st.one_of(st.none(), st.none(), st.integers(0, 2000)))
        def one(muts, cut):
            doc = copy.deepcopy(base)
            for p, v in muts:
                set_in(doc, p, v)
            doc["state"] = "rolled-back"  # never anything else: nothing is ever written
            try:
                body = json.dumps(doc, allow_nan=True)
            except (TypeError, ValueError):
                body = json.dumps(base)
            if cut is not None:
                body = body[:cut]
            path = tmp / "r.json"
            path.write_text(body)
            text = f"{muts} cut {cut}"
            failure, ok = outcome(text, lambda: load_rollback(path))
            record(text, failure, ok, None)
    else:
        raise SystemExit(f"unknown fuzz kind {kind!r}")

    (one if seed is None else __import__("hypothesis").seed(seed)(one))()
    k = CLI_SAMPLE.get(kind, 0)
    if candidates and k:  # evenly spaced over the run
        step = len(candidates) / min(k, len(candidates))
        for c in (candidates[int(i * step)] for i in range(min(k, len(candidates)))):
            report["sample"].append({"id": c.id, "what": c.what, "argv": list(c.argv),
                                     "files": {f: b.hex() for f, b in c.files.items()}})
    return report


# ------------------------------------------------------------------ the tests

_reports: dict[str, dict] = {}


def run_child(kind: str, n: int) -> dict:
    """The in-process fuzz of one kind, in a child process under a memory limit; a
    crash or a hang names the case it was running (the child logs each to stderr)."""
    def pre():
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEM, CHILD_MEM))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    p = subprocess.Popen([sys.executable, __file__, kind, str(n)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=pre,
                         env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        out, err = p.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        p.returncode = f"a hang: killed after {CHILD_TIMEOUT} s"
    if p.returncode != 0:
        rc = p.returncode
        why = signal.Signals(-rc).name if isinstance(rc, int) and rc < 0 else rc
        last = [x for x in err.splitlines() if x.startswith("case ")][-1:]
        tail = [x for x in err.splitlines() if not x.startswith("case ")][-5:]
        pytest.fail(f"fuzz {kind}: the child died ({why}) in {last}: {tail}")
    return json.loads(out)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_fuzz_in_process(kind, capsys):
    rep = run_child(kind, EXAMPLES[kind])
    _reports[kind] = rep
    fails = rep["failures"]
    with capsys.disabled():
        print(f"\nfuzz {kind}: {rep['cases']} cases, {rep['accepted']} accepted, "
              f"{rep['cases'] - rep['accepted'] - len(fails)} refused in one line, "
              f"{len(fails)} failures")
    assert rep["cases"] >= EXAMPLES[kind] // 2
    assert not fails, "\n".join(f"{f['case']}\n    -> {f['error']}" for f in fails[:15])


def test_fuzz_through_the_cli(capsys):
    """A sample of the generated cases through `rxlab ...` in child processes."""
    cases = []
    for kind in sorted(CLI_SAMPLE):
        rep = _reports.get(kind) or run_child(kind, EXAMPLES[kind])
        cases += [H.Case(s["id"], s["what"], tuple(s["argv"]), "either", "fuzz",
                         {k: bytes.fromhex(v) for k, v in s["files"].items()})
                  for s in rep["sample"]]
    results = H.run_all(cases)
    failed = {c.id: (c, results[c.id][1]) for c in cases if results[c.id][0] == "FAIL"}
    with capsys.disabled():
        print(f"\nfuzz through the CLI: {len(cases)} cases, {len(failed)} failures")
    assert len(cases) >= sum(CLI_SAMPLE.values()) // 2
    assert not failed, "\n".join(f"{H.argv_text(c)}  [{c.what}]\n    -> {d}"
                                 for c, d in failed.values())


def test_bases_are_valid():
    """The fuzz starts from scenarios that build: each mutation is what breaks one."""
    from rxlab.build import build
    from rxlab.scenario import scenario_from_dict

    for name, data in base_scenarios().items():
        build(scenario_from_dict(copy.deepcopy(data), name))


def test_schema_walk_reaches_nested_fields():
    paths = schema_paths()
    for p in ("traffic.groups.N.rate.pps", "apps.N.afxdp.rx_ring", "nic.rss.contexts.N.id",
              "xdp.rules.N.match.rx_queue", "apps.N.migrate.every_s", "host.cost_jitter.cv"):
        assert p in paths, p


if __name__ == "__main__":
    print(json.dumps(fuzz(sys.argv[1], int(sys.argv[2]),
                          int(sys.argv[3]) if len(sys.argv) > 3 else None)))
