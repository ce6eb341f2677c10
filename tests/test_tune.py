"""``rxlab tune`` end to end: advice that holds on every traffic seed.

* synthetic flows: no indirection table (the hashes of random addresses are a draw);
* real flows (``--pcap``): a table only when it improves the objective on every run;
* every setting validated on >= 5 seeds, reported per run; a setting that loses on any
  run is not recommended; a setting already in place is never a change;
* UDP apps are unconnected by default, so RFS is not sized for them; RFS memory limit;
* the drops objective names the elephant flow and the ring; flow limit only where it
  drops; what a setting makes worse is said with figures.

Simulations are short (10-20 ms of traffic); the tune runs are module-scoped fixtures.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from rich.console import Console

from rxlab.build import build, flow_steering
from rxlab.capture.pcap import open_capture
from rxlab.cli.main import main
from rxlab.scenario import load_scenario, scenario_from_dict, with_overrides
from rxlab.traffic.flows import build_flows
from rxlab.tune import tune
from rxlab.tune.capture import write_pcap
from rxlab.tune.recommend import verdict
from rxlab.tune.report import render

EXAMPLE = Path(__file__).parents[1] / "examples" / "memcached-16cpu.yaml"

SKEWED = {
    "name": "skewed-8",
    "description": "4K UDP flows, Zipf 1.1 rates, 8 queues and 8 CPUs",
    "seed": 7, "duration": 0.01, "drain": 0.005,
    "host": {"cpus": 8},
    "nic": {"queues": 8, "ring_size": 1024, "link_gbps": 100},
    "traffic": {"groups": [{
        "name": "clients", "flows": 4000, "proto": "udp",
        "src": {"cidr": "10.0.0.0/8"}, "dst": {"addr": "192.168.0.1"},
        "sport": {"range": [1024, 65535]}, "dport": {"value": 9000},
        "rate": {"pps": 5_000_000, "per_flow": "zipf", "zipf_s": 1.1}, "size": 64}]},
    "apps": [{"name": "server", "cpus": "0-7", "cost": {"user_ns": 0, "syscall_ns": 40},
              "batch": 64, "rcvbuf": 4194304}],
}


def _cli_json(argv: list[str]) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return json.loads(buf.getvalue())


def _text(r: dict) -> str:
    con = Console(file=io.StringIO(), width=200)
    render(r, con)
    return con.file.getvalue()


def memcached(duration: float = 0.05):
    """The 16-CPU memcached example with RPS on all CPUs, on an older host's costs (the
    echo-2013 profile), 512-descriptor rings and Zipf s = 1.0 (the heaviest of the 50K
    flows carries about 9 % of the packets): rx rings overflow, most on the queue that
    carries the elephant flow. On a 4.9-6.4 kernel: from 6.5 each memcached thread's
    recv() runs its CPU's pending softirq inline (tests/test_softirq_inline.py), and the
    threads' sockets, not the rings, overflow first. With 4 MiB socket buffers: CFS
    gives ksoftirqd and a memcached thread on one CPU 12 ms slices each (sched_latency
    6 ms x 4 at 16 CPUs, over two tasks), and a thread's default 208 KiB holds ~270 of
    the ~2,000 packets that arrive for it meanwhile."""
    sc = load_scenario(str(EXAMPLE))
    return with_overrides(sc, {"duration": duration, "host.cost_profile": "echo-2013",
                               "host.kernel": "6.1", "apps.0.rcvbuf": 4 << 20,
                               "kernel.rps_cpus": "ffff", "nic.ring_size": 512,
                               "traffic.groups.0.rate.zipf_s": 1.0})


@pytest.fixture(scope="module")
def drops_report():
    sc = memcached()
    return sc, tune(sc, objective="drops", jobs=1)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("tune") / "skewed.yaml"
    path.write_text(yaml.safe_dump(SKEWED))
    return _cli_json(["tune", str(path), "--json", "--objective", "latency", "--jobs", "1"])


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune-pcap")
    sc = scenario_from_dict(SKEWED)
    write_pcap(sc, d / "flows.pcap")
    path = d / "skewed.yaml"
    path.write_text(yaml.safe_dump(SKEWED))
    r = _cli_json(["tune", str(path), "--json", "--objective", "latency", "--jobs", "1",
                   "--pcap", str(d / "flows.pcap"), "-o", str(d / "out.yaml")])
    return r, d


# ---- seeds and validation -----------------------------------------------------------


def test_a_setting_that_loses_on_one_seed_is_not_adopted():
    base = [{"p99_ns": x} for x in (100.0, 100.0, 100.0, 100.0, 100.0)]
    wins_once = [{"p99_ns": x} for x in (10.0, 105.0, 110.0, 99.0, 101.0)]
    assert not verdict(base, wins_once, "p99_ns")["every_run"]
    better = [{"p99_ns": x} for x in (90.0, 95.0, 80.0, 99.0, 70.0)]
    assert verdict(base, better, "p99_ns")["every_run"]


def test_every_setting_is_simulated_on_five_seeds(synthetic):
    r = synthetic
    assert r["runs"] == [f"seed {s}" for s in range(7, 12)]
    assert set(r["before"]) == set(r["runs"])
    for name, c in r["candidates"].items():
        if not c.get("in_place"):
            assert list(c["runs"]) == r["runs"], name


def test_recommended_settings_win_on_every_run(drops_report, captured):
    for r in (drops_report[1], captured[0]):
        key = r["metric"]
        for name in r["recommended"]:
            c = r["candidates"][name]
            for lab in r["runs"]:
                b, a = r["before"][lab][key], c["runs"][lab][key]
                assert a < b or a == b == 0, (name, lab, b, a)
        for name, c in r["candidates"].items():  # and whatever loses somewhere is out
            if c.get("runs") and any(c["runs"][lab][key] > r["before"][lab][key]
                                     for lab in r["runs"]):
                assert name not in r["recommended"] and not c["adopt"]
        if r["recommended"]:
            for lab in r["runs"]:
                assert r["after"][lab][key] <= r["before"][lab][key]


def test_fewer_than_five_seeds_is_refused(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SKEWED))
    assert main(["tune", str(path), "--seeds", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rxlab: error: --seeds 3") and err.count("\n") == 1


# ---- tables: synthetic vs real flows ------------------------------------------------


def test_synthetic_flows_get_no_indirection_table(synthetic):
    r = synthetic
    assert r["flows_source"] == "synthetic" and not r["indirection"]["planned"]
    assert not any(n.startswith("table") for n in r["candidates"])
    cmds = " ".join(c["cmd"] for c in r["commands"])
    assert "ethtool -X" not in cmds and "rss-set" not in cmds
    text = _text(r)
    assert "RSS indirection table: none recommended" in text and "--pcap" in text


def test_the_hashes_of_synthetic_flows_change_with_the_seed():
    """Why no table: the flows' addresses (so their buckets) are a draw of the seed."""
    sc = scenario_from_dict(SKEWED)
    a, b = build_flows(sc.traffic, 7), build_flows(sc.traffic, 8)
    assert not np.array_equal(a.src_v4, b.src_v4)
    heavy = [fl.describe(int(np.argmax(fl.rate_pps))) for fl in (a, b)]
    assert heavy[0] != heavy[1]


def test_with_a_capture_tables_are_validated_on_every_run(captured):
    r, d = captured
    assert r["flows_source"] == "capture" and r["indirection"]["planned"]
    assert r["runs"] == [f"seed {s}" for s in range(7, 12)] + ["capture"]
    tables = [n for n in r["candidates"] if n.startswith("table ")]
    assert tables  # there was something to try
    rec = r["indirection"]["recommended"]
    if rec is None:
        assert not any(n.startswith("table ") for n in r["recommended"])
    else:
        c = r["candidates"][f"table {rec}"]
        assert all(c["runs"][lab]["p99_ns"] < r["before"][lab]["p99_ns"] for lab in r["runs"])
        sc = load_scenario(str(d / "out.yaml"))
        assert sc.nic.rss.indirection == c["overrides"]["nic.rss.indirection"]


def test_a_written_capture_reads_back_as_the_scenarios_flows(tmp_path):
    sc = scenario_from_dict(SKEWED)
    out = write_pcap(sc, tmp_path / "c.pcap")
    cap = open_capture(tmp_path / "c.pcap")
    fl = build_flows(sc.traffic, sc.seed)
    assert cap.packets == out["packets"] and cap.bytes == 64 * cap.packets
    want = {fl.describe(i) for i in range(len(fl))}
    got = {cap.flows.describe(i) for i in range(len(cap.flows))}
    assert got <= want and len(got) > 0.5 * len(want)


# ---- connected UDP and RFS ------------------------------------------------------------


def _records(app: dict, proto: str = "udp") -> list[bool]:
    d = json.loads(json.dumps(SKEWED))
    d["traffic"]["groups"][0]["proto"] = proto
    d["apps"] = [{**d["apps"][0], **app}]
    return [bool(x) for x in build(scenario_from_dict(d)).so.sock["sock_record"]]


def test_udp_apps_are_unconnected_by_default_tcp_stays_connected():
    assert not any(_records({}))  # a UDP server's socket does not record (TCP_ESTABLISHED)
    assert all(_records({}, "tcp"))
    assert all(_records({"connected": True}))


def test_rfs_is_not_sized_for_unconnected_udp(drops_report):
    _, r = drops_report
    assert not r["rfs"]["offered"] and "TCP_ESTABLISHED" in r["rfs"]["why"]
    assert "rfs" not in r["candidates"]
    cmds = " ".join(c["cmd"] for c in r["commands"])
    assert "rps_sock_flow_entries" not in cmds and "rps_flow_cnt" not in cmds


class _DevFlow(ctypes.Structure):  # struct rps_dev_flow, include/net/rps.h
    _fields_ = [("cpu", ctypes.c_uint16), ("filter", ctypes.c_uint16),
                ("last_qtail", ctypes.c_uint32)]


class _DevFlowHash(ctypes.Structure):  # v6.18+: u32 hash under CONFIG_RFS_ACCEL
    _fields_ = [*_DevFlow._fields_, ("hash", ctypes.c_uint32)]


@pytest.mark.parametrize("kernel,struct", [("6.17", _DevFlow), ("6.19", _DevFlowHash)])
def test_rfs_tables_stay_within_the_memory_limit_and_say_the_cost(kernel, struct):
    from rxlab.kernel.versions import behaviour
    from rxlab.tune import rfs

    rng = np.random.default_rng(1)
    n, nq = 200_000, 64
    h = rng.integers(1, 1 << 32, n, dtype=np.uint64)
    rxq = rng.integers(0, nq, n)
    out = rfs.size_tables(h, rxq, np.arange(128) % nq, nq, 1e-4, behaviour(kernel),
                          exact=False)
    mem = out["memory"]
    assert out["capped"] and out["wanted"]["memory"]["total_bytes"] > rfs.MEMORY_LIMIT
    assert mem["total_bytes"] <= rfs.MEMORY_LIMIT
    assert mem["dev_entry_bytes"] == ctypes.sizeof(struct)
    assert mem["dev_tables_bytes"] == nq * out["rps_flow_cnt"] * ctypes.sizeof(struct)
    assert mem["sock_table_bytes"] == 4 + ctypes.sizeof(ctypes.c_uint32) * out[
        "rps_sock_flow_entries"]


# ---- drops ------------------------------------------------------------------------------


def test_drops_objective_names_the_ring_and_the_elephant(drops_report):
    sc, r = drops_report
    d = r["drops"]
    total: dict = {}
    for lab in r["runs"]:
        for k, v in r["before"][lab]["drops_by_reason"].items():
            total[k] = total.get(k, 0) + v
    assert d["dominant"] == max(total, key=total.get) == "ring_full"
    # the elephant: the heaviest flow of the seed's own draw, found here independently
    for run in d["runs"]:
        seed = int(run["run"].split()[1])
        fl = build_flows(sc.traffic, seed)
        top = int(np.argmax(fl.rate_pps))
        assert run["elephant"]["five_tuple"] == fl.describe(top)
        q = int(flow_steering(sc, fl)["rxq"][top])
        assert run["elephant"]["queue"] == q
    assert "rx ring" in d["bottleneck"] and any(
        run["elephant"]["five_tuple"] in d["bottleneck"] for run in d["runs"])
    rings = [n for n, c in r["candidates"].items() if c["family"] == "ring"]
    assert rings and all(r["candidates"][n]["overrides"]["nic.ring_size"] <= 8160
                         or sc.nic.driver != "ice" for n in rings)
    assert any(c["cmd"].startswith("ethtool -G eth0 rx ") for c in r["commands"]) == any(
        r["candidates"][n]["family"] == "ring" for n in r["recommended"])


def test_rps_already_on_is_not_a_change(drops_report):
    _, r = drops_report
    assert r["steering"]["rps"]["verdict"] != "yes"
    assert "rps" not in r["candidates"] and "kernel.rps_cpus" not in r["overrides"]
    assert not any("rps_cpus" in c["cmd"] for c in r["commands"])


def test_rps_on_where_it_would_be_advised_is_in_place():
    """RPS on all CPUs of the example: the CPUs without interrupts are idle enough that
    RPS would be advised; it is on, so it is reported in place and not changed."""
    from rxlab.simulate import simulate
    from rxlab.tune import rfs

    sc = with_overrides(load_scenario(str(EXAMPLE)), {"duration": 0.02,
                                                     "kernel.rps_cpus": "ffff"})
    raw = rfs.verdicts(simulate(sc).data, sc, build(sc), None)["rps"]
    assert raw["verdict"] == "yes" and set(raw["spread_to"]) <= set(range(16))
    r = tune(sc, objective="balance", jobs=1)
    assert r["steering"]["rps"]["verdict"] == "in place"
    assert "rps" not in r["candidates"] and "kernel.rps_cpus" not in r["overrides"]
    assert "RPS: in place" in _text(r)


def test_flow_limit_only_where_it_drops(drops_report):
    _, r = drops_report
    for name, c in r["candidates"].items():
        if c["family"] != "flow_limit" or c.get("in_place"):
            continue
        dropped = sum(run["drops_by_reason"].get("flow_limit", 0) for run in c["runs"].values())
        assert c["flow_limit_drops"] == dropped
        if not dropped:
            assert not c["adopt"] and name not in r["recommended"]


def test_flow_limit_that_drops_nothing_is_not_recommended(tmp_path):
    """The flow-limit reproduction's antagonist split into 64 flows: no flow holds half
    of a backlog's recent packets, so flow limit drops nothing though backlogs overflow."""
    from rxlab.repro.flow_limit import scenario

    d = scenario(True, False, 0.02, "6.19")
    ant = d["traffic"]["groups"][1]
    ant.update(flows=64, sport={"range": [1024, 65535]})
    sc = scenario_from_dict(d)
    r = tune(sc, objective="drops", antagonist="antagonist", jobs=1)
    assert sum(run["drops_by_reason"].get("backlog", 0) for run in r["before"].values())
    c = r["candidates"]["flow limit"]
    assert c["flow_limit_drops"] == 0 == sum(
        run["drops_by_reason"].get("flow_limit", 0) for run in c["runs"].values())
    assert not c["adopt"] and "flow limit" not in r["recommended"]
    assert "kernel.flow_limit_cpu_bitmap" not in r["overrides"]


def test_what_a_setting_worsens_is_said_with_figures(drops_report):
    _, r = drops_report
    seen = 0
    for name, c in r["candidates"].items():
        if not c.get("runs"):
            continue
        pb = np.mean([r["before"][lab]["p99_ns"] for lab in r["runs"]])
        pa = np.mean([c["runs"][lab]["p99_ns"] for lab in r["runs"]])
        said = [x for x in c["costs"] if x.startswith("raises p99 latency from ")]
        assert bool(said) == (pa > pb * 1.002), name
        if said:
            seen += 1
            assert f"{pa / 1e6:.1f} ms" in said[0] or f"{pa / 1e3:.1f} us" in said[0]
            assert f"  {name}: raises p99" in _text(r)
    assert seen  # the longer rings and backlogs do raise it here


def test_antagonist_group_flow_limit(tmp_path):
    from rxlab.repro.flow_limit import scenario

    path = tmp_path / "fl.yaml"
    path.write_text(yaml.safe_dump(scenario(True, False, 0.02, "6.19")))
    r = _cli_json(["tune", str(path), "--objective", "drops", "--antagonist", "antagonist",
                   "--json", "--jobs", "1"])
    c = r["candidates"]["flow limit"]
    assert c["overrides"]["kernel.flow_limit_cpu_bitmap"] == "1"  # the enqueuing CPU 0
    if c["adopt"]:
        assert c["flow_limit_drops"] > 0
        for lab in r["runs"]:
            assert c["runs"][lab]["victim_drop_rate"] < r["before"][lab]["victim_drop_rate"]


# ---- determinism and errors -------------------------------------------------------------


def test_same_input_same_report_serial_or_parallel():
    sc = scenario_from_dict({**SKEWED, "duration": 0.005})
    a = tune(sc, objective="latency", jobs=1)
    b = tune(sc, objective="latency", jobs=2)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("extra,msg", [
    (["--objective", "speed"], "--objective 'speed'"),
    (["--collision-target", "1.5"], "--collision-target"),
    (["--collision-target", "x"], "not a number"),
    (["--target-drops", "-1"], "--target-drops"),
    (["--antagonist", "nope"], "no traffic group"),
    (["--duration", "0"], "--duration"),
    (["--rsspp-rounds", "0"], "--rsspp-rounds"),
    (["--form", "table"], "--form"),
    (["--seed", "-3"], "--seed"),
    (["--seeds", "x"], "--seeds"),
    (["--jobs", "0"], "--jobs"),
    (["--pcap", "/nonexistent.pcap"], "--pcap /nonexistent.pcap: no such file"),
])
def test_bad_inputs_one_line_exit_2(tmp_path, capsys, extra, msg):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SKEWED))
    assert main(["tune", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and err.startswith("rxlab: error:")


def test_missing_scenario_exit_2(capsys):
    assert main(["tune", "/nonexistent/scenario.yaml"]) == 2
    assert "no such scenario file" in capsys.readouterr().err


def test_a_scenario_that_replays_a_capture_is_real_flows(tmp_path):
    small = {**SKEWED, "host": {"cpus": 4}, "nic": {"queues": 4, "link_gbps": 100},
             "apps": [{**SKEWED["apps"][0], "cpus": "0-3"}]}
    write_pcap(scenario_from_dict(small), tmp_path / "cap.pcap")
    sc = {**small, "traffic": {"pcap": {"file": "cap.pcap"}}}
    path = tmp_path / "pcap.yaml"
    path.write_text(yaml.safe_dump(sc))
    r = _cli_json(["tune", str(path), "--json", "--jobs", "1"])
    cap = open_capture(tmp_path / "cap.pcap")
    assert r["flows_source"] == "capture" and r["runs"][-1] == "capture"
    assert r["indirection"]["planned"] and r["flows"] == len(cap.flows)
    assert sum(r["indirection"]["bucket_pps"]) == pytest.approx(
        cap.packets / cap.duration_s, rel=1e-6)


def test_groups_that_fix_every_flow_are_real_flows():
    """One group per flow with fixed addresses and ports (as host export --sockets writes
    them): the seed draws only packet times, so a table can be planned."""
    groups = [{"name": f"udp-{i}", "flows": 1, "proto": "udp",
               "src": {"addr": f"10.0.{i // 200}.{i % 200 + 1}"},
               "dst": {"addr": "192.168.0.1"}, "sport": {"value": 1024 + 7 * i},
               "dport": {"value": 9000}, "rate": {"pps": 20_000 + 30_000 * (i % 5)},
               "size": 64} for i in range(40)]
    d = {**SKEWED, "host": {"cpus": 4}, "nic": {"queues": 4, "link_gbps": 100},
         "traffic": {"groups": groups}, "apps": [{**SKEWED["apps"][0], "cpus": "0-3"}]}
    r = tune(scenario_from_dict(d), objective="balance", jobs=1)
    assert r["flows_source"] == "fixed" and r["indirection"]["planned"]
    assert "capture" not in r["runs"] and len(r["runs"]) == 5
    assert r["indirection"]["recommended"] is None or all(
        r["candidates"][f"table {r['indirection']['recommended']}"]["runs"][lab]["imbalance"]
        < r["before"][lab]["imbalance"] for lab in r["runs"])
    # and the synthetic scenario is not taken for real flows
    from rxlab.tune.recommend import fixed_flows

    assert not fixed_flows(scenario_from_dict(SKEWED))
