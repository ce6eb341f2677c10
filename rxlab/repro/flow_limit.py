"""Seed 003: RPS flow limit (Willem de Bruijn's patch, acked by Eric Dumazet, Apr 2013).

A multi-threaded UDP echo server: RX IRQ and RPS on cpu0, application threads on cpus
2-7 each serving 20k requests/s. A 400 kpps single-flow antagonist halves throughput;
with flow limit the antagonist's excess is dropped and the server serves its full load.

Modelling choices (docs/model.md): the receiving device delivers with ``netif_rx()``
(like veth, tun or a non-NAPI driver), so every packet reaches cpu0's backlog as it
arrives. With a NAPI driver the driver poll and the backlog poll alternate 64 packets
each on cpu0, one flow can never bring more than 64 packets per round into the backlog,
and the ring, not the backlog, overflows: flow limit could not act, yet the seed shows
it acting. The antagonist is a storm to a port nobody listens on (dropped as
UdpNoPorts after the protocol work). The echo-2013 cost profile calibrates the
protocol work (``stack_rx``) to the seed's "throughput halves".
"""

from __future__ import annotations

from rxlab.repro.base import claim, fig, make

NAME = "flow-limit"
TITLE = "Seed 003: UDP echo server, RPS on cpu0, 400 kpps antagonist, flow_limit off/on"
SEED = "003_ec862622954fde36.txt"
TABLE = ["served_rps", "offered_rps", "antagonist_stack_pps", "backlog_drops",
         "flow_limit_drops", "flow_limit_count_cpu0", "cpu0_softirq", "p99_latency_us"]

CLIENT_RPS = 20_000  # per application thread (seed)
THREADS = 6  # cpus 2-7
ANTAGONIST_PPS = 400_000


def scenario(antagonist: bool, flow_limit: bool, duration: float, kernel: str) -> dict:
    groups = [{
        "name": "clients", "flows": 600, "proto": "udp",
        "src": {"cidr": "10.1.0.0/16"}, "dst": {"addr": "192.168.1.1"},
        "sport": {"range": [1024, 65535]}, "dport": {"value": 7},
        "rate": {"pps": CLIENT_RPS * THREADS, "per_flow": "constant"},
        "arrivals": "poisson", "size": 128,
    }]
    if antagonist:
        groups.append({
            "name": "antagonist", "flows": 1, "proto": "udp",
            "src": {"addr": "10.9.9.9"}, "dst": {"addr": "192.168.1.1"},
            "sport": {"value": 4242}, "dport": {"value": 9},  # no listener
            "rate": {"pps": ANTAGONIST_PPS}, "arrivals": "poisson", "size": 128,
        })
    return {
        "name": "flow-limit",
        "seed": 3,
        "duration": duration,
        "drain": 0.02,
        "host": {"cpus": 8, "kernel": kernel, "cost_profile": "echo-2013"},
        "nic": {"queues": 1, "link_gbps": 10, "irq_affinity": [0], "rx_mode": "netif_rx"},
        "kernel": {
            "rps_cpus": "1",
            "netdev_max_backlog": 1000,
            "flow_limit_cpu_bitmap": "1" if flow_limit else "0",
            "flow_limit_table_len": 4096,
        },
        "traffic": {"groups": groups},
        "apps": [{"name": "echo", "cpus": "2-7", "groups": ["clients"], "spread": "round_robin",
                  "cost": {"user_ns": 10_000}, "batch": 16}],
    }


def cases(quick: bool, kernel: str | None):
    dur = 0.1 if quick else 1.0
    k = kernel or "3.11"  # flow limit was merged for v3.11 (commit 99bbc7074190)
    out = []
    for name, ant, fl in (("baseline", False, False), ("antagonist", True, False),
                          ("antagonist+flow_limit", True, True)):
        params = {"antagonist_pps": ANTAGONIST_PPS if ant else 0, "flow_limit": fl,
                  "kernel": k}
        out.append((name, params, make(scenario(ant, fl, dur, k), NAME)))
    return out


def metrics(name: str, res) -> dict:
    d = res.data
    dur = d["duration_s"]
    served = sum(a["served"] for a in d["apps"])
    m = res.data.get("flows_by_group", {})
    return {
        "served_rps": round(m.get("clients", {}).get("delivered", served) / dur, 1),
        "offered_rps": CLIENT_RPS * THREADS,
        # the antagonist's packets that got through the backlog to the protocol stack
        "antagonist_stack_pps": round(d["packets"]["dropped_by_reason"]["no_socket"] / dur, 1),
        "backlog_drops": d["packets"]["dropped_by_reason"]["backlog"],
        "flow_limit_drops": d["packets"]["dropped_by_reason"]["flow_limit"],
        "flow_limit_count_cpu0": d["cpus"][0]["softnet_stat"]["flow_limit_count"],
        "cpu0_softirq": d["cpus"][0]["util"]["softirq"],
        "p99_latency_us": round(d["latency_ns"]["to_app"]["p99"] / 1e3, 1),
    }


def claims(cases: list[dict]):
    base, ant, fl = (c["metrics"] for c in cases)
    return [
        claim("baseline serves its full load (>= 97 % of 120k req/s)", "predicted",
              fig("served / offered, baseline", base["served_rps"] / base["offered_rps"],
                  ">=", 0.97)),
        claim("the antagonist roughly halves throughput (served 35-65 % of baseline)",
              "calibrated",
              fig("served with antagonist / baseline", ant["served_rps"] / base["served_rps"],
                  "within", (0.35, 0.65)),
              calibrated_from="echo-2013 stack_rx (2.5 us of protocol work per packet) set "
                              "so that the antagonist halves the echo throughput"),
        claim("with flow_limit the server processes its complete load (>= 97 % of baseline)",
              "predicted",
              fig("served with flow_limit / baseline", fl["served_rps"] / base["served_rps"],
                  ">=", 0.97)),
        claim("flow_limit drops land on cpu0's flow_limit_count", "predicted",
              fig("cpu0 flow_limit_count", fl["flow_limit_count_cpu0"], ">", 0)),
    ]
