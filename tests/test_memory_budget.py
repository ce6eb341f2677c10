"""Memory limits at the edge: the estimate bounds what build() allocates, a scenario over
--max-memory is one line and exit 2 before anything is allocated, the time series are
capped (the interval grows, the result says so), and result JSON is always valid."""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import struct

import numpy as np
import pytest

from rxlab import memory_budget as mb
from rxlab.build import build
from rxlab.cli.main import main
from rxlab.cli.run_cmd import parse_sets
from rxlab.errors import ConservationError, UsageError
from rxlab.metrics.result import Result
from rxlab.scenario import builtin_names, load_scenario, scenario_from_dict, with_overrides
from rxlab.simulate import simulate


def _tcp(udp_group, name, flows, pps):
    return {**udp_group(name, flows, pps), "proto": "tcp"}


def varied(scenario_dict, udp_group) -> dict:
    """Scenario dicts that exercise every sized table of build()."""
    v6 = udp_group("b", 10, 50_000, ip=6, src={"cidr": "2001:db8::/64"},
                   dst={"addr": "2001:db8::1"})
    return {
        "rfs_arfs_mlx5": scenario_dict(
            [_tcp(udp_group, "t", 300, 100_000)], host={"cpus": 4},
            nic={"queues": 4, "irq_affinity": [0, 1, 2, 3], "arfs": {"model": "mlx5"}},
            kernel={"rps_sock_flow_entries": 4096, "rps_flow_cnt": 1024},
            apps=[{"name": "a", "cpus": "0-3", "spread": "round_robin"}]),
        "arfs_capacity_rfs_per_queue": scenario_dict(
            [_tcp(udp_group, "t", 50, 50_000)], host={"cpus": 2},
            nic={"queues": 2, "irq_affinity": [0, 1],
                 "arfs": {"model": "ice-tuple-match", "capacity": 100_000}},
            kernel={"rps_sock_flow_entries": 1 << 16, "rps_flow_cnt": {0: 256, 1: 4096}},
            apps=[{"name": "a", "cpus": "0-1"}]),
        "afxdp": scenario_dict(
            [udp_group("g", 64, 200_000)], host={"cpus": 3},
            nic={"queues": 2, "irq_affinity": [0, 1]},
            xdp={"rules": [{"match": {"proto": "udp"}, "action": "redirect-xsk"}]},
            apps=[{"name": "xsk", "cpus": 2, "batch": 64,
                   "afxdp": {"queues": [0], "rx_ring": 4096, "umem_frames": 8192}}]),
        "xdp_cpumap_v6_migrate_flow_limit": scenario_dict(
            [udp_group("a", 2000, 300_000), v6], host={"cpus": 8},
            nic={"queues": 2, "irq_affinity": [0, 1]},
            xdp={"rules": [{"match": {"group": "a"}, "action": "redirect-cpu",
                            "cpus": "2-5"}]},
            cpumap={"cpus": "2-5", "qsize": 1024},
            kernel={"flow_limit_cpu_bitmap": "ff", "flow_limit_table_len": 8192,
                    "flow_limit_variant": "2013", "rps_cpus": "f0",
                    "netdev_max_backlog": 5000},
            apps=[{"name": "s", "cpus": "6-7", "rcvbuf": 1 << 20,
                   "migrate": [{"at": 0.005, "cpu": 5}, {"at": 0.01, "cpu": 7}]},
                  {"name": "t", "cpus": "4-7", "migrate": {"every_s": 0.004, "cpus": "4-7"}}],
            metrics={"interval": 0.0001}),
        "many_cpus_small_ring": scenario_dict(
            [udp_group("g", 5000, 100_000)], host={"cpus": 64},
            nic={"queues": 32, "irq_affinity": list(range(32)), "ring_size": 100},
            apps=[{"name": "a", "cpus": "0-63", "rcvbuf": 4096}]),
        "no_apps": scenario_dict([udp_group("g", 3, 10_000)], apps=[]),
    }


def _arrays(obj, seen: set, out: list) -> None:
    """Every numpy array reachable through tuples, lists, dicts and dataclasses."""
    if isinstance(obj, np.ndarray):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    elif isinstance(obj, list | tuple):
        for x in obj:
            _arrays(x, seen, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _arrays(x, seen, out)
    elif hasattr(obj, "__dataclass_fields__"):
        for f in obj.__dataclass_fields__:
            _arrays(getattr(obj, f), seen, out)


def model_bytes(m) -> int:
    out: list = []
    _arrays([m.params, m.nic, m.sd, m.so, m.st, m.ev, m.rf, m.ar, m.cm, m.flows,
             m.port_state, m.capture], set(), out)
    return sum(a.nbytes for a in out)


def all_scenarios(scenario_dict, udp_group, tmp_path):
    for name in builtin_names():
        yield name, load_scenario(name)
    for name, d in varied(scenario_dict, udp_group).items():
        yield name, scenario_from_dict(d)
    pcap = tmp_path / "two.pcap"
    write_pcap(pcap, [(0, 1234), (1, 1235), (2, 1234)])
    yield "pcap", scenario_from_dict(scenario_dict([], traffic={"pcap": {"file": str(pcap)}}))


def test_estimate_bounds_what_build_allocates(scenario_dict, udp_group, tmp_path):
    seen = []
    for name, sc in all_scenarios(scenario_dict, udp_group, tmp_path):
        est = mb.estimate(sc)
        actual = model_bytes(build(sc))
        seen.append((name, actual, est.arrays))
        assert actual <= est.arrays <= 3 * actual, (name, actual, est.arrays)
    assert len(seen) >= 9


@pytest.mark.parametrize("ov", [
    {"traffic.groups.0.flows": 200_000},
    {"nic.queues": 64, "nic.ring_size": 16384},
    {"kernel.netdev_max_backlog": 50_000},
    {"host.cpus": 256, "apps.0.cpus": "0-255"},
    {"kernel.rps_sock_flow_entries": 1 << 22, "kernel.rps_flow_cnt": 1 << 18},
    {"apps.0.rcvbuf": 64 << 20},
])
def test_estimate_bounds_the_peak_resident_memory_of_build(ov):
    """VmHWM reset (clear_refs 5) before build(): what build() adds at its peak, arena
    copy and temporaries included, stays under the estimate without the interpreter."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pytest.skip("no /proc/self/clear_refs: cannot reset the peak RSS")
    build(load_scenario("default"))  # anything loaded once is not the scenario's
    sc = with_overrides(load_scenario("default"), ov)
    est = mb.estimate(sc)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    before = _status_kb("VmRSS")
    m = build(sc)
    grown = (_status_kb("VmHWM") - before) * 1024
    actual = model_bytes(m)
    assert actual <= est.arrays
    assert grown <= est.total - mb.OVERHEAD, (ov, grown >> 20, (est.total - mb.OVERHEAD) >> 20)
    assert grown >= actual // 2  # the measurement saw the allocation


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(key)


# --- the CLI cases: one line, exit 2, the field named, nothing allocated -------------

def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("sets,field,limit", [
    (["traffic.groups.0.flows=1000000000"], "traffic.groups[0].flows", "8GiB"),
    (["nic.queues=4096", "nic.ring_size=65536"], "nic.ring_size", "8GiB"),
    (["kernel.rps_sock_flow_entries=536870912", "kernel.rps_flow_cnt=1048576"],
     "kernel.rps_sock_flow_entries", "8GiB"),
    (["kernel.netdev_max_backlog=1000000000"], "kernel.netdev_max_backlog", "8GiB"),
    (["apps.0.rcvbuf=2147483646"], "apps[0].rcvbuf", "512MiB"),
    (["kernel.flow_limit_table_len=1048576", "host.cpus=4096"],
     "kernel.flow_limit_table_len", "8GiB"),
    (["host.cpus=4096", "apps.0.cpus=0-4095", "kernel.netdev_max_backlog=10"], "apps[0].cpus",
     "512MiB"),
])
def test_over_the_limit_is_one_line_naming_the_field(capsys, monkeypatch, sets, field, limit):
    def no_flows(*a, **k):
        raise AssertionError("flows were built before the memory check")

    monkeypatch.setattr("rxlab.build.build_flows", no_flows)
    argv = ["run", "default", "--duration", "0.02", "--json", "--max-memory", limit]
    for s in sets:
        argv += ["--set", s]
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"rxlab: error: {field}: the scenario needs ~"), lines[0]
    assert f"limit --max-memory {limit}; " in lines[0]
    ov = {**parse_sets(sets), "duration": 0.02}
    needed = mb.estimate(with_overrides(load_scenario("default"), ov)).total
    assert needed > mb.parse_size(limit)
    assert f"~{mb.format_size(needed)}," in lines[0]


def test_rcvbuf_past_int_max_is_refused_too(capsys):
    rc, out, err = run_cli(capsys, "run", "default", "--duration", "0.02",
                           "--set", "apps.0.rcvbuf=1000000000000")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "apps[0].rcvbuf" in err


def test_default_limit_is_half_the_usable_memory(monkeypatch):
    monkeypatch.delenv(mb.ENV, raising=False)
    lim = mb.default_limit()
    assert lim.nbytes == int(mb.usable_memory() * mb.DEFAULT_SHARE)
    assert "50%" in lim.source
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert mb.usable_memory() <= phys
    monkeypatch.setattr(resource, "getrlimit", lambda r: (3 * mb.GiB, resource.RLIM_INFINITY))
    assert mb.usable_memory() <= 3 * mb.GiB


def test_the_default_limit_refuses_without_the_flag(capsys, monkeypatch):
    monkeypatch.delenv(mb.ENV, raising=False)
    rc, out, err = run_cli(capsys, "run", "default", "--duration", "0.02",
                           "--set", "traffic.groups.0.flows=1000000000")
    assert rc == 2 and "(the default: 50% of the memory this process may use)" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("bad", ["8parsecs", "-1", "0", "nan", "1e3GiB", "", "63MiB"])
def test_bad_max_memory_is_one_line(capsys, bad):
    rc, out, err = run_cli(capsys, "run", "default", "--max-memory", bad)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("rxlab: error: --max-memory")


@pytest.mark.parametrize("text,n", [("8GiB", 8 << 30), ("512MiB", 512 << 20), ("2G", 2 << 30),
                                    ("2GB", 2 * 10**9), ("1.5 GiB", 3 << 29),
                                    ("134217728", 1 << 27), (1 << 30, 1 << 30)])
def test_sizes(text, n):
    assert mb.parse_size(text) == n


@pytest.mark.parametrize("cmd", [["tune", "default"], ["reproduce", "flow-limit", "--quick"],
                                 ["sweep", "nosuch.yaml"]])
def test_every_simulating_command_takes_max_memory(capsys, cmd):
    rc, out, err = run_cli(capsys, *cmd, "--max-memory", "100MiB")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    if cmd[0] != "sweep":  # the sweep file is checked first
        assert "--max-memory: the scenario needs" in err and "limit --max-memory 100MiB" in err


def test_the_flag_does_not_outlive_the_command(capsys, monkeypatch):
    monkeypatch.delenv(mb.ENV, raising=False)
    run_cli(capsys, "run", "default", "--max-memory", "100MiB")
    assert mb.ENV not in os.environ


def test_python_api_max_memory():
    with pytest.raises(UsageError, match=r"^--max-memory: .*limit --max-memory 100MiB"):
        simulate("default", duration=0.001, max_memory="100MiB")
    assert simulate("default", duration=0.001, max_memory=1 << 40)["packets"]["offered"] > 0


# --- the time series: capped, the interval grows, the result says so -----------------

def test_tiny_interval_grows_and_says_so(capsys):
    rc, out, err = run_cli(capsys, "run", "default", "--duration", "0.02", "--json",
                           "--set", "metrics.interval=1e-9")
    assert rc == 0
    d = json.loads(out)
    total_ns = round((0.02 + load_scenario("default").drain) * 1e9)
    iv_ns = round(d["config"]["interval_s"] * 1e9)
    assert d["config"]["intervals"] == -(-total_ns // iv_ns) <= mb.max_intervals(4)
    assert -(-total_ns // (iv_ns // 2)) > mb.max_intervals(4)  # no shorter step fits
    assert iv_ns // 10 ** (len(str(iv_ns)) - 1) in (1, 2, 5)  # a 1-2-5 value
    assert len(d["notices"]) == 1 and "metrics.interval" in d["notices"][0]
    assert err.strip() == f"rxlab: {d['notices'][0]}"


def test_long_duration_keeps_memory_bounded(capsys):
    sc = with_overrides(load_scenario("default"), {"duration": 1_000_000})
    est = mb.estimate(sc)
    assert est.intervals <= mb.MAX_INTERVALS and est.total < 1 * mb.GiB
    # the run itself: traffic for 10 ms, then a million seconds of an idle host
    rc, out, err = run_cli(capsys, "run", "default", "--json", "--set", "duration=1000000",
                           "--set", "traffic.groups.0.stop=0.01")
    assert rc == 0
    d = json.loads(out)
    assert d["config"]["interval_s"] == 200.0 and d["config"]["intervals"] == 5001
    assert d["packets"]["offered"] == d["packets"]["delivered"] > 0


def test_default_interval_unchanged_when_under_the_cap():
    sc = load_scenario("default")
    iv, n, notice = mb.series_intervals(sc)
    assert iv == round(sc.metrics.interval * 1e9) and notice is None
    assert n == int(np.ceil((sc.duration + sc.drain) / sc.metrics.interval - 1e-9))


def test_many_cpus_get_fewer_intervals():
    assert mb.max_intervals(4) == mb.MAX_INTERVALS
    assert mb.max_intervals(4096) < mb.max_intervals(256) < mb.MAX_INTERVALS
    assert 4096 * mb.max_intervals(4096) * (mb.SERIES_ARRAY_CPU + mb.SERIES_LIST_CPU) \
        <= mb.SERIES_BUDGET


MAC = bytes(12)


def _frame(sport: int) -> bytes:
    udp = struct.pack(">HHHH", sport, 9000, 8 + 18, 0) + bytes(18)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([192, 168, 0, 1])) + udp
    return MAC + struct.pack(">H", 0x0800) + ip


def write_pcap(path, records) -> None:
    """A classic pcap (microseconds) of Ethernet/IPv4/UDP frames: (second, source port)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for sec, sport in records:
        fr = _frame(sport)
        out.append(struct.pack("<IIII", sec, 0, len(fr), len(fr)) + fr)
    path.write_bytes(b"".join(out))


def test_capture_two_days_apart(capsys, tmp_path):
    pcap = tmp_path / "two-days.pcap"
    write_pcap(pcap, [(0, 1234), (2 * 86400, 1234)])
    rc, out, err = run_cli(capsys, "run", "default", "--pcap", str(pcap), "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["packets"]["offered"] == d["packets"]["delivered"] == 2
    assert d["config"]["intervals"] <= mb.MAX_INTERVALS and d["config"]["interval_s"] == 20.0
    assert "metrics.interval" in err and d["notices"]


def test_capture_flows_bounded_by_file_size(scenario_dict, tmp_path):
    pcap = tmp_path / "c.pcap"
    write_pcap(pcap, [(0, p) for p in range(1000, 1100)])
    sc = scenario_from_dict(scenario_dict([], traffic={"pcap": {"file": str(pcap)}}))
    term = next(t for t in mb.estimate(sc).terms if t.field == "traffic.pcap.file")
    flows = pcap.stat().st_size // mb.MIN_FLOW_RECORD
    assert 100 <= flows < 200 and term.arrays == flows * mb.FLOW_BYTES


# --- JSON: never NaN or Infinity ----------------------------------------------------

def test_non_finite_result_is_an_internal_error_not_invalid_json():
    res = Result({"latency_ns": {"mean": float("nan")}, "ok": 1.0})
    with pytest.raises(ConservationError, match=r"latency_ns\.mean is nan"):
        res.to_json()
    with pytest.raises(ConservationError, match=r"x\.1 is inf"):
        Result({"x": [0.5, float("inf")]}).to_json()


def test_cli_exits_3_on_a_non_finite_result(capsys, monkeypatch, tmp_path):
    sim = importlib.import_module("rxlab.simulate")  # the package exports the function
    real = sim.assemble

    def broken(m, n):
        res = real(m, n)
        res.data["latency_ns"]["mean"] = float("nan")
        return res

    monkeypatch.setattr(sim, "assemble", broken)
    out_dir = tmp_path / "out"
    rc, out, err = run_cli(capsys, "run", "default", "--duration", "0.001", "--json",
                           "--out", str(out_dir))
    assert rc == 3 and out == "" and not out_dir.exists()
    assert err.strip().splitlines() == [
        "rxlab: internal error: result latency_ns.mean is nan: a number that is not finite "
        "(a bug in rxlab; nothing was written)"]


def test_latency_of_nothing_delivered_is_null(capsys, scenario_dict, udp_group, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario_dict([udp_group("g", 3, 10_000)], apps=[])))
    rc, out, _ = run_cli(capsys, "run", str(path), "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["packets"]["delivered"] == 0 and d["packets"]["dropped"] > 0
    for k in ("p50", "p99", "p999", "mean", "max"):
        assert d["latency_ns"]["to_app"][k] is None
        assert d["latency_ns"]["to_socket"][k] is None
    assert d["latency_ns"]["mean"] is None and d["latency_ns"]["to_app"]["samples"] == 0
    rc, out, _ = run_cli(capsys, "run", str(path))  # the table skips what is not there
    assert rc == 0 and "latency NIC" not in out
