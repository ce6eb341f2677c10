"""``rxlab explain drops|latency``: on scenarios whose cause is known by construction
(one elephant flow pinned to a queue, a tiny backlog, a tiny socket buffer, no drops at
all) the explanation names exactly that place, flow and setting. The elephant's queue
and CPU in the memcached-style case are computed here from the Toeplitz hash
(Microsoft's RSS verification key and vector), the default indirection table
(ethtool_rxfh_indir_default: i % queues) and reciprocal_scale() over the RPS map."""

from __future__ import annotations

import json

import pytest
import yaml

from rxlab.cli.main import main


def _write(tmp_path, name, data) -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def _explain(capsys, *args):
    rc = main(["explain", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _json(capsys, *args) -> dict:
    rc, out, err = _explain(capsys, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


def _base(groups, cpus=4, queues=4, **sections):
    d = {"name": "t", "seed": 1, "duration": 0.02, "drain": 0.01,
         "host": {"cpus": cpus},
         "nic": {"queues": queues, "irq_affinity": list(range(queues)), "ring_size": 256,
                 "link_gbps": 100},
         "kernel": {}, "traffic": {"groups": groups},
         "apps": [{"name": "sink", "cpus": f"0-{cpus - 1}",
                   "cost": {"user_ns": 0, "syscall_ns": 0}, "rcvbuf": 64 << 20,
                   "batch": 1024}]}
    for k, v in sections.items():
        d[k] = {**d.get(k, {}), **v} if isinstance(v, dict) else v
    return d


def _group(name, flows, pps, **kw):
    g = {"name": name, "flows": flows, "proto": "udp",
         "src": {"addr": "10.9.9.9"} if flows == 1 else {"cidr": "10.0.0.0/8"},
         "dst": {"addr": "192.168.0.1"},
         "sport": {"value": 4242} if flows == 1 else {"range": [1024, 65535]},
         "dport": {"value": 9000}, "rate": {"pps": pps}, "arrivals": "poisson", "size": 64}
    g.update(kw)
    return g


ELEPHANT = "udp 10.9.9.9:4242 -> 192.168.0.1:9000"


def test_an_elephant_pinned_to_queue_2_is_named_with_its_queue_cpu_and_rule(capsys,
                                                                             tmp_path):
    # one flow faster than a CPU can poll, put on queue 2 by an n-tuple rule; mice spread
    sc = _base([_group("elephant", 1, 2_000_000), _group("mice", 200, 200_000)],
               host={"cpus": 4, "costs": {"stack_rx": 1000}},
               nic={"ntuple": [{"match": {"group": "elephant"}, "queue": 2}]})
    ex = _json(capsys, "drops", _write(tmp_path, "eleph", sc), "--dev", "eth1")
    ring = [c for c in ex["causes"] if c["reason"] == "ring_full"]
    assert [c["where"] for c in ring] == ["rx queue 2"]
    e = ring[0]["elephant"]
    assert e["flow"] == ELEPHANT and e["queue"] == 2 and e["irq_cpu"] == 2
    assert e["share"] > 0.9  # the mice on queue 2 are a small part of it
    sets = [s["setting"] for s in ring[0]["settings"]]
    assert any(s.startswith("ethtool -N eth1 flow-type udp4 src-ip 10.9.9.9 dst-ip "
                            "192.168.0.1 src-port 4242 dst-port 9000 action ") for s in sets)
    assert any(s.startswith("ethtool -G eth1 rx N (now 256)") for s in sets)
    # the text names the same, within 80 columns
    rc, out, _ = _explain(capsys, "drops", _write(tmp_path, "eleph", sc))
    assert rc == 0 and "ring_full on rx queue 2 (IRQ CPU 2)" in out and ELEPHANT in out


def test_a_tiny_backlog_is_the_cause_and_netdev_max_backlog_the_setting(capsys, tmp_path):
    # RPS sends queue 0's packets to CPU 3, which has time to spare but a 4-packet backlog
    sc = _base([_group("clients", 500, 1_000_000)], queues=1,
               kernel={"rps_cpus": "8", "netdev_max_backlog": 4},
               apps=[{"name": "sink", "cpus": 2, "cost": {"user_ns": 0, "syscall_ns": 0},
                      "rcvbuf": 64 << 20, "batch": 1024}])
    ex = _json(capsys, "drops", _write(tmp_path, "tiny", sc))
    assert ex["dropped_by_reason"].keys() == {"backlog"}
    (c,) = ex["causes"]
    assert c["reason"] == "backlog" and c["where"] == "CPU 3"
    assert c["elephant"] is None
    assert [s["setting"] for s in c["settings"]] == [
        "sysctl -w net.core.netdev_max_backlog=N (now 4)"]
    cpu3 = [r for r in ex["softirq_budget"] if r["cpu"] == 3]
    assert cpu3 and cpu3[0]["time_squeeze"] == 0 and "backlog filled between runs" in (
        cpu3[0]["why"])


def test_a_small_socket_buffer_is_the_cause_and_so_rcvbuf_the_setting(capsys, tmp_path):
    sc = _base([_group("clients", 50, 200_000)], cpus=2, queues=1,
               apps=[{"name": "slow", "cpus": 1, "cost": {"user_ns": 4000},
                      "rcvbuf": 1024, "batch": 1}])
    ex = _json(capsys, "drops", _write(tmp_path, "rcvbuf", sc))
    assert ex["dropped_by_reason"].keys() == {"socket_rcvbuf"}
    (c,) = ex["causes"]
    assert c["where"] == "socket 0" and c["flows"]["flows"] == 50
    sets = [s["setting"] for s in c["settings"]]
    assert sets[:2] == ["setsockopt(SO_RCVBUF) / apps[].rcvbuf (now 1024)",
                        "sysctl -w net.core.rmem_max=N"]


def test_no_drops_says_so(capsys):
    rc, out, err = _explain(capsys, "drops", "default", "--duration", "0.01")
    assert rc == 0 and not err
    assert "No packet was dropped" in out
    ex = _json(capsys, "drops", "default", "--duration", "0.01")
    assert ex["dropped"] == 0 and ex["causes"] == []


def test_a_saved_result_names_flows_from_its_scenario_or_explains_without(capsys, tmp_path):
    """``rxlab run --out DIR`` writes the scenario beside result.json; explain runs it
    again and, as it gives the saved result bit for bit, names the same flows as on the
    scenario itself. Without it, or when it no longer gives that result (another rxlab,
    here a tampered result), the counters are explained without flows."""
    sc = _base([_group("clients", 500, 1_000_000)], queues=1,
               kernel={"rps_cpus": "8", "netdev_max_backlog": 4})
    out_dir = tmp_path / "run"
    path = _write(tmp_path, "tiny", sc)
    assert main(["run", path, "--out", str(out_dir)]) == 0
    capsys.readouterr()
    direct = _json(capsys, "drops", path)
    ex = _json(capsys, "drops", str(out_dir))
    assert [c["where"] for c in ex["causes"] if c["reason"] == "backlog"] == ["CPU 3"]
    assert [c["flows"] for c in ex["causes"]] == [c["flows"] for c in direct["causes"]]
    assert any(c["flows"] for c in ex["causes"])
    assert any("bit for bit" in n for n in ex["notes"])

    data = json.loads((out_dir / "result.json").read_text())
    data["packets"]["offered"] += 1  # not what the scenario gives
    (out_dir / "result.json").write_text(json.dumps(data))
    ex = _json(capsys, "drops", str(out_dir))
    assert all(c["flows"] is None for c in ex["causes"])
    assert any("no flow table" in n and "another result" in n for n in ex["notes"])

    (out_dir / "scenario.yaml").unlink()
    ex = _json(capsys, "drops", str(out_dir / "result.json"))
    assert all(c["flows"] is None for c in ex["causes"])
    assert any("no scenario.yaml beside it" in n for n in ex["notes"])


def test_saved_scenario_reruns_to_the_saved_result(tmp_path, capsys):
    """scenario.yaml holds every field: `rxlab run` on it gives result.json again."""
    out_dir = tmp_path / "run"
    assert main(["run", "default", "--duration", "0.01", "--seed", "7", "--out",
                 str(out_dir)]) == 0
    capsys.readouterr()
    again = tmp_path / "again"
    assert main(["run", str(out_dir / "scenario.yaml"), "--out", str(again)]) == 0
    assert json.loads((again / "result.json").read_text()) == json.loads(
        (out_dir / "result.json").read_text())
    assert (again / "scenario.yaml").read_text() == (out_dir / "scenario.yaml").read_text()


def test_bad_uses_are_one_line_errors(capsys, tmp_path):
    rc, _, err = _explain(capsys, "arfs", "default")
    assert rc == 2 and err.count("\n") == 1 and "explain arfs" in err
    rc, _, err = _explain(capsys, "drops", "default", "--flows", "10")
    assert rc == 2 and "--flows" in err and err.count("\n") == 1
    bad = tmp_path / "r.json"
    bad.write_text("{}")
    rc, _, err = _explain(capsys, "drops", str(bad))
    assert rc == 2 and "result.json" in err and err.count("\n") == 1


# ------------------------------------------------ memcached-style 16 CPUs, 8 queues ----
MS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c"
                       "6a42b73bbeac01fa")


def toeplitz(key: bytes, data: bytes) -> int:
    """The Toeplitz hash as the Microsoft RSS specification defines it."""
    k = int.from_bytes(key, "big")
    klen = len(key) * 8
    out = 0
    for i, byte in enumerate(data):
        for b in range(8):
            if byte & (0x80 >> b):
                out ^= (k >> (klen - 32 - (i * 8 + b))) & 0xFFFFFFFF
    return out


def test_toeplitz_here_matches_the_specification_vector():
    # RSS verification suite, IPv4 with TCP: 66.9.149.187:2794 -> 161.142.100.80:1766
    data = bytes([66, 9, 149, 187, 161, 142, 100, 80]) + (2794).to_bytes(2, "big") + (
        1766).to_bytes(2, "big")
    assert toeplitz(MS_KEY, data) == 0x51CCC178


MEMCACHED = {
    "name": "memcached-16cpu-rps-non-irq",
    "seed": 1, "duration": 0.1,
    # stack_rx 1.3 us: the elephant's RPS CPU (CPU 9) clearly past its capacity (at 1.2 us
    # it sat at the edge, dropping 0-0.06 %)
    "host": {"cpus": 16, "kernel": "6.19", "costs": {"stack_rx": 1300}},
    "nic": {"queues": 8, "ring_size": 1024, "link_gbps": 25,
            "irq_affinity": [0, 1, 2, 3, 4, 5, 6, 7]},
    "kernel": {"netdev_max_backlog": 1000, "rps_cpus": "ff00"},
    "traffic": {"groups": [{
        "name": "clients", "flows": 50000, "proto": "udp", "src": {"cidr": "10.0.0.0/8"},
        "dst": {"addr": "192.168.0.1"}, "sport": {"range": [1024, 65535]},
        "dport": {"value": 11211}, "rate": {"pps": 3_000_000, "per_flow": "zipf",
                                            "zipf_s": 1.2},
        "arrivals": "poisson", "size": 128}]},
    # a deep socket buffer: the elephant's reader (SO_REUSEPORT's pick, independent of
    # its RPS CPU) may fall behind, but the backlog stays the one cause of drops
    "apps": [{"name": "memcached", "cpus": "0-15", "cost": {"user_ns": 1000},
              "rcvbuf": 64 << 20}],
}


@pytest.fixture(scope="module")
def memcached_flows():
    from rxlab.scenario import scenario_from_dict
    from rxlab.traffic.flows import build_flows

    sc = scenario_from_dict(MEMCACHED, "memcached")
    return build_flows(sc.traffic, sc.seed)


def test_memcached_explain_names_the_elephant_its_queue_and_cpu(capsys, tmp_path,
                                                                memcached_flows):
    fl = memcached_flows
    top = int(fl.weight.argmax())  # the traffic spec's largest Zipf share
    src, dst = int(fl.src_v4[top]), int(fl.dst_v4[top])
    h = toeplitz(MS_KEY, src.to_bytes(4, "big") + dst.to_bytes(4, "big")
                 + int(fl.sport[top]).to_bytes(2, "big") + int(fl.dport[top]).to_bytes(2, "big"))
    queue = (h & 127) % 8  # default indirection table of 128 entries over 8 queues
    rps = list(range(8, 16))  # rps_cpus ff00
    cpu = rps[(h * len(rps)) >> 32]  # reciprocal_scale(hash, len) over the map
    ex = _json(capsys, "drops", _write(tmp_path, "mc", MEMCACHED))
    assert ex["dropped"] > 0
    first = ex["causes"][0]
    assert first["reason"] == "backlog" and first["where"] == f"CPU {cpu}"
    e = first["elephant"]
    assert e is not None and e["flow"] == fl.describe(top)
    assert e["queue"] == queue and e["rss_bucket"] == h & 127 and e["cpu"] == cpu
    assert e["irq_cpu"] == queue  # irq_affinity [0..7]
    sets = " | ".join(s["setting"] for s in first["settings"])
    assert f"net.core.flow_limit_cpu_bitmap={1 << queue:x}" in sets
    assert "netdev_max_backlog" in sets and "rps_cpus" in sets
    # latency: the busiest softirq CPU is the elephant's backlog CPU
    lat = _json(capsys, "latency", _write(tmp_path, "mc", MEMCACHED))
    k = [c for c in lat["causes"] if c["part"] == "to_socket"][0]
    assert k["where"] == f"CPU {cpu}" and k["elephant"]["flow"] == fl.describe(top)


def test_flow_limit_is_counted_on_the_enqueuing_cpu_and_names_the_elephant(capsys,
                                                                            tmp_path):
    # queue 0 polls on CPU 0, RPS sends everything to CPU 1, which is too slow; flow
    # limit is on for CPU 0 (the enqueuer), so the elephant loses its excess there
    sc = _base([_group("elephant", 1, 1_500_000), _group("mice", 300, 300_000)], cpus=3,
               queues=1, host={"cpus": 3, "costs": {"stack_rx": 1000}},
               kernel={"rps_cpus": "2", "flow_limit_cpu_bitmap": "1",
                       "netdev_max_backlog": 200},
               apps=[{"name": "sink", "cpus": 2, "cost": {"user_ns": 0, "syscall_ns": 0},
                      "rcvbuf": 64 << 20, "batch": 1024}])
    ex = _json(capsys, "drops", _write(tmp_path, "fl", sc))
    assert ex["dropped_by_reason"].get("flow_limit", 0) > 0
    fl = [c for c in ex["causes"] if c["reason"] == "flow_limit"]
    assert [c["where"] for c in fl] == ["CPU 0"]
    assert fl[0]["elephant"]["flow"] == ELEPHANT
    assert any(s["setting"].startswith("sysctl -w net.core.flow_limit_cpu_bitmap=")
               for s in fl[0]["settings"])
    bl = [c for c in ex["causes"] if c["reason"] == "backlog"]
    assert [c["where"] for c in bl] == ["CPU 1"]  # the drop itself: the target's column


def test_the_memcached_example_with_rps_on_all_cpus_names_the_elephant(capsys, tmp_path):
    """examples/memcached-16cpu.yaml, RPS on all 16 CPUs (the variant with most drops):
    the largest cause names the heaviest flow, its queue, backlog CPU and reader."""
    from pathlib import Path

    from rxlab.scenario import load_scenario
    from rxlab.traffic.flows import build_flows

    example = Path(__file__).resolve().parents[1] / "examples" / "memcached-16cpu.yaml"
    if not example.is_file():
        pytest.skip("examples/memcached-16cpu.yaml is not in this tree")
    sc = load_scenario(str(example))
    fl = build_flows(sc.traffic, sc.seed)
    top = int(fl.weight.argmax())
    h = toeplitz(MS_KEY, int(fl.src_v4[top]).to_bytes(4, "big")
                 + int(fl.dst_v4[top]).to_bytes(4, "big")
                 + int(fl.sport[top]).to_bytes(2, "big") + int(fl.dport[top]).to_bytes(2, "big"))
    queues = sc.nic.queues
    ex = _json(capsys, "drops", str(example), "--set", "kernel.rps_cpus=ffff",
               "--duration", "0.05")
    assert ex["dropped"] > 0
    e = ex["causes"][0]["elephant"]
    assert e is not None and e["flow"] == fl.describe(top)
    assert e["queue"] == (h & (sc.nic.rss.table_size - 1)) % queues
    assert e["cpu"] == (h * 16) >> 32  # RPS over CPUs 0-15
    assert e["socket"] >= 0 and e["thread_cpu"] == sc.apps[0].cpu_list()[e["socket"]]


def test_latency_names_the_slow_reader_or_the_busy_softirq_cpu(capsys, tmp_path):
    # a reader that needs 4 us per packet at 200 Kpps: the wait is in the socket
    slow = _base([_group("clients", 50, 200_000)], cpus=2, queues=1,
                 apps=[{"name": "slow", "cpus": 1, "cost": {"user_ns": 4000},
                        "rcvbuf": 64 << 20, "batch": 1}])
    ex = _json(capsys, "latency", _write(tmp_path, "slow", slow))
    first = ex["causes"][0]
    assert first["part"] == "to_app" and first["where"] == "socket 0"
    assert ex["to_app"]["p99"] > 2 * ex["to_socket"]["p99"]
    # a fast reader, 1 ms interrupt coalescing: the wait is before the socket, on CPU 0
    coal = _base([_group("clients", 50, 20_000)], cpus=2, queues=1,
                 nic={"rx_usecs": 1000},
                 apps=[{"name": "sink", "cpus": 1, "cost": {"user_ns": 0, "syscall_ns": 0},
                        "rcvbuf": 64 << 20, "batch": 1024}])
    ex = _json(capsys, "latency", _write(tmp_path, "coal", coal))
    first = ex["causes"][0]
    assert first["part"] == "to_socket" and first["where"] == "CPU 0"
    assert first["settings"][0]["setting"] == "ethtool -C DEV rx-usecs N (now 1000)"
    assert ex["to_socket"]["p50"] >= 100_000  # packets wait for the coalesced interrupt
    assert any(f.startswith("interrupt coalescing holds each interrupt up to 1000 us")
               for f in first["facts"])


def test_latency_names_irq_deferral_and_its_setting(capsys, tmp_path):
    """napi_defer_hard_irqs 2 with a 200 us gro_flush_timeout at 20 kpps: every poll after
    the first is the hrtimer's, and a packet waits for its next expiry; the explanation
    says so, with the sysfs file that turns it off first."""
    dfr = _base([_group("clients", 50, 20_000)], cpus=2, queues=1,
                nic={"napi_defer_hard_irqs": 2, "gro_flush_timeout": 200_000},
                apps=[{"name": "sink", "cpus": 1, "cost": {"user_ns": 0, "syscall_ns": 0},
                       "rcvbuf": 64 << 20, "batch": 1024}])
    ex = _json(capsys, "latency", _write(tmp_path, "dfr", dfr))
    first = ex["causes"][0]
    assert first["part"] == "to_socket" and first["where"] == "CPU 0"
    assert first["settings"][0]["setting"] == (
        "echo 0 > /sys/class/net/DEV/napi_defer_hard_irqs (now 2)")
    fact = next(f for f in first["facts"] if f.startswith("IRQ deferral: "))
    assert "started by the NAPI hrtimer" in fact and "gro_flush_timeout 200 us" in fact
    assert ex["to_socket"]["p50"] >= 50_000  # packets wait for the timer


def test_latency_names_busy_polling_and_its_cpu(capsys, tmp_path):
    """One flow at 20 kpps to a reader on another CPU with busy_read 1000 us: its busy
    loop spans every gap, so it takes nearly every packet itself and spins its CPU; the
    explanation says both."""
    bp = _base([_group("rr", 1, 20_000)], cpus=2, queues=1, kernel={"busy_read": 1000},
               apps=[{"name": "sink", "cpus": 1, "cost": {"user_ns": 0, "syscall_ns": 0}}])
    ex = _json(capsys, "latency", _write(tmp_path, "bp", bp))
    facts = [f for c in ex["causes"] for f in c["facts"] if f.startswith("busy polling: ")]
    assert len(facts) == 1
    share = float(facts[0].split("took ")[1].split("%")[0])
    cpus = float(facts[0].split("kept ")[1].split(" CPUs")[0])
    assert share > 90 and 0.9 < cpus < 1.1, facts[0]  # a last loop runs past the traffic


def test_an_owned_tcp_socket_over_its_backlog_limit_is_socket_backlog(capsys, tmp_path):
    """A TCP reader that holds its socket for long reads (20 us of recvmsg per 256
    packets) while one flow sends 900 kpps: tcp_v4_rcv() finds the socket owned and
    tcp_add_backlog() drops over its limit, so socket_backlog dominates and the
    explanation names that path and the read size before the buffer."""
    sc = {"name": "tcp-backlog", "seed": 3, "duration": 0.05, "drain": 0.005,
          "host": {"cpus": 2, "kernel": "6.15"},
          "nic": {"queues": 1, "irq_affinity": [0], "ring_size": 4096, "link_gbps": 100},
          "traffic": {"groups": [_group("f", 1, 900_000, proto="tcp", size=74)]},
          "apps": [{"name": "sink", "cpus": "1", "cost": {"user_ns": 0, "syscall_ns": 5000},
                    "rcvbuf": 16384, "batch": 256}]}
    ex = _json(capsys, "drops", _write(tmp_path, "tcpbl", sc))
    by = ex["dropped_by_reason"]
    assert by["socket_backlog"] > by.get("socket_rcvbuf", 0) > 0
    (c,) = ex["causes"]
    assert c["reason"] == "socket_backlog" and c["where"] == "socket 0"
    assert c["packets"] == by["socket_backlog"] + by["socket_rcvbuf"]  # sk_drops: both
    assert any("tcp_add_backlog()" in f for f in c["facts"])
    assert c["settings"][0]["setting"] == "smaller reads / apps[].batch (now 256)"
