"""The model side: the lab's configuration as rxlab scenarios, and what they predict.

The lab is a 2-CPU host whose "NIC" is the receiving veth: ``nic.rx_mode: netif_rx``
(veth_xmit -> __netif_rx -> get_rps_cpu -> enqueue_to_backlog), the sender's CPU 0 is
where netif_rx runs (``irq_affinity: [0]``), no hardware hash (``rxhash: false``: the
skb hash is the software flow hash, which the kernel side forces onto the packets).
The receiving veth has 4 rx queues; every check gives all of them the same RPS/RFS
settings, so one modelled queue stands for them (the queue a veth packet lands on
follows the sender's tx queue: veth records no rx queue and ``get_rps_cpu()`` reads
``queue_mapping - 1``; it does not matter then).

Calibration (named, not hidden): the offered rate per flow is what the kernel's sender
achieved, and where the kernel's consumer was slowed down (800 tc u32 filters) the
model's per-packet protocol cost ``stack_rx`` is set from the kernel's measured
processing rate of the target CPU. Everything else is the model's own prediction.
"""

from __future__ import annotations

from rxlab.kernel.hashfn import reciprocal_scale

HASHRND = "6b636865636b2d72786c61622d6b6579"  # the model's flow-dissector key (any value)
SRC, DST, DPORT = "10.77.0.1", "10.77.0.2", 9000
FRAME = 106  # 64-byte UDP payload + UDP/IP/Ethernet headers + FCS


def group(name: str, sports: list[int], pps: float) -> dict:
    """UDP flows from SRC to DST:9000 with consecutive source ports, ``pps`` in total."""
    return {
        "name": name, "flows": len(sports), "proto": "udp",
        "src": {"addr": SRC}, "dst": {"addr": DST},
        "sport": {"sequential": sports[0]} if len(sports) > 1 else {"value": sports[0]},
        "dport": {"value": DPORT},
        "rate": {"pps": max(1.0, pps), "per_flow": "constant"},
        "arrivals": "poisson", "size": FRAME,
    }


def scenario(groups: list[dict], kernel: dict, *, app_cpu: int = 1, duration: float = 0.3,
             costs: dict | None = None, migrate: list | None = None,
             connected: bool = True) -> dict:
    for g in groups:  # sequential ports must be contiguous: the check's ports are
        assert g["flows"] >= 1
    # the receiver asks for SO_RCVBUFFORCE 8 MiB; the kernel doubles it (sk_rcvbuf 16 MiB)
    app = {"name": "receiver", "cpus": app_cpu, "rcvbuf": 16 << 20, "batch": 64,
           "connected": connected, "cost": {"user_ns": 0}}
    if migrate:
        app["migrate"] = migrate
    return {
        "name": "kernel-check",
        "seed": 1,
        "duration": duration,
        "drain": 0.05,
        "host": {"cpus": 2, "costs": dict(costs or {})},
        "nic": {"queues": 1, "irq_affinity": [0], "rx_mode": "netif_rx", "rxhash": False,
                "link_gbps": 100},
        "kernel": {"hashrnd": HASHRND, **kernel},
        "traffic": {"groups": groups},
        "apps": [app],
    }


def to_scenario(d: dict):
    from rxlab.scenario import scenario_from_dict
    return scenario_from_dict(d, "kernel-check model")


def simulate(d: dict):
    import rxlab
    return rxlab.simulate(to_scenario(d))


def flow_hashes(d: dict) -> dict[int, int]:
    """Source port -> the skb hash the model gives that flow (its software flow hash)."""
    from rxlab.build import build
    m = build(to_scenario(d))
    return {int(p): int(h) & 0xFFFFFFFF
            for p, h in zip(m.flows.sport, m.params.flow["flow_hash"], strict=True)}


def rps_cpu(h: int, cpus: list[int], *, low_bits: bool = False) -> int:
    """get_rps_cpu's plain-RPS choice: ``cpus[reciprocal_scale(hash, len)]``.

    ``low_bits`` is the deliberately wrong rule ``cpus[hash % len]`` (mutation
    ``rps_low_bits``), for showing that the check can fail."""
    if low_bits:
        return cpus[h % len(cpus)]
    return cpus[int(reciprocal_scale(h, len(cpus)))]


def softnet(res) -> dict[int, dict[str, int]]:
    return {c["cpu"]: dict(c["softnet_stat"]) for c in res.data["cpus"]}


def processed_share(res, cpu: int) -> float:
    sn = softnet(res)
    tot = sum(r["processed"] for r in sn.values())
    return sn[cpu]["processed"] / tot if tot else 0.0


def softirq_share(res, cpu: int, t0: float, t1: float) -> float:
    """Share of backlog-processing (softirq) time on ``cpu`` in [t0, t1): where the
    model processed the packets of that window (netif_rx's own work is hardirq time)."""
    ts = res.series["t_s"]
    rows = [i for i, t in enumerate(ts) if t0 <= t < t1]
    soft = res.series["cpu_softirq"]
    tot = sum(sum(soft[i]) for i in rows)
    return sum(soft[i][cpu] for i in rows) / tot if tot else 0.0


# --- XDP cpumap (cpumap_cpu_choice) -----------------------------------------------------------

def cpumap_scenario(groups: list[dict], redirect: dict[int, int], cpus: list[int], *,
                    qsize: int = 192, rps_cpus: str | None = None,
                    duration: float = 0.3) -> dict:
    """The lab with a native XDP program on the receiving veth (which switches veth to
    NAPI: ``nic.rx_mode: napi``, the NAPI poll on the sender's CPU 0): one rule per
    redirected flow, ``redirect-cpu`` to that flow's cpumap CPU; everything else passes.
    ``hash_metadata: false``: the program stores no hash, so the skb the cpumap kthread
    builds carries none. ``rps_cpus``: the map of rx queue 0 (the one the kernel
    consults for cpumap skbs, which carry no rx queue)."""
    kernel = {"rps_cpus": {0: rps_cpus}} if rps_cpus else {}
    d = scenario(groups, kernel, duration=duration)
    d["nic"]["rx_mode"] = "napi"
    d["xdp"] = {"rules": [{"match": {"proto": "udp", "src_port": p},
                           "action": "redirect-cpu", "cpus": str(c)}
                          for p, c in sorted(redirect.items())],
                "default": "pass", "hash_metadata": False}
    d["cpumap"] = {"cpus": ",".join(str(c) for c in sorted(cpus)), "qsize": qsize,
                   "gro": "auto"}
    return d


def cpumap_rule_cpu(d: dict, sport: int, napi_cpu: int = 0) -> int:
    """The CPU the scenario's XDP rules send a UDP flow from ``sport`` to: the first
    matching redirect-cpu rule's (single) cpumap CPU, else the NAPI CPU (XDP_PASS).
    As in kernel/bpf/cpumap.c (``cpu_map_kthread_run()``): the kthread
    of the chosen entry builds the skb and runs the stack on its CPU."""
    for rule in d["xdp"]["rules"]:
        m = rule["match"]
        if m.get("proto", "udp") == "udp" and m.get("src_port", sport) == sport:
            if rule["action"] != "redirect-cpu":
                return napi_cpu
            return int(str(rule["cpus"]).split(",")[0].split("-")[0])
    return napi_cpu


def cpumap_hash_after(d: dict, sport: int) -> str:
    """What the skb of a UDP flow from ``sport`` carries as hash after the XDP program:
    ``"none"`` when a redirect-cpu rule sends it through a cpumap and the program stores
    no hash metadata (the kthread builds a fresh skb), ``"metadata"`` with
    ``hash_metadata``, ``"kept"`` when it passes (the skb it came in)."""
    for rule in d["xdp"]["rules"]:
        m = rule["match"]
        if m.get("proto", "udp") == "udp" and m.get("src_port", sport) == sport:
            if rule["action"] == "redirect-cpu":
                return "metadata" if d["xdp"].get("hash_metadata") else "none"
            return "kept"
    return "kept"


def cpumap_counters(res) -> dict[int, dict[str, int]]:
    """Per cpumap entry (destination CPU): the model's tracepoint sums."""
    return {int(e["cpu"]): {k: int(e[k]) for k in ("enqueued", "enqueue_drops",
                                                   "kthread_processed")}
            for e in res.data.get("cpumap", [])}
