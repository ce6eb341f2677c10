"""Scenarios the benchmark runs.

``flow_limit``: the ``antagonist+flow_limit`` case of the seed-003 reproduction
(``rxlab.repro.flow_limit``), lengthened. ``arfs_flow_match``: the same for an aRFS
reproduction if one exists (``None`` otherwise). ``reference``: the RSS + RPS + backlog
scenario that rxlab and the SimPy model both run.
"""

from __future__ import annotations

from rxlab.scenario import Scenario, scenario_from_dict, with_overrides

# Reference scenario for the SimPy comparison. Two rx queues with their interrupts on
# cpu0 and cpu1 (RSS), RPS from both queues to cpus 2-3, and a zero-cost sink thread
# on cpu4 so that the socket never fills and no application competes with softirq.
# The protocol work (stack_rx) is raised to 400 ns so that the RPS CPUs, not the IRQ
# CPUs, are the bottleneck: at 4.8 Mpps they are offered ~110 % of what they can
# process and netdev_max_backlog drops the excess (about 5 % of the packets).
REF_PPS = 4_800_000
REF_FLOWS = 256


def reference_dict(duration: float, seed: int = 1, pps: float = REF_PPS,
                   max_backlog: int = 1000) -> dict:
    return {
        "name": "bench-rss-rps",
        "description": "RSS over 2 queues (IRQs on cpu0-1), RPS to cpu2-3, backlog drops",
        "seed": seed,
        "duration": duration,
        "drain": 0.005,
        # wakeup_remote 0: the SimPy reference has no application thread, so the backlog
        # CPUs pay nothing for waking the sink on CPU 4 there either (like for like)
        "host": {"cpus": 5, "kernel": "6.19", "cost_profile": "modern-x86",
                 "costs": {"stack_rx": 400.0, "wakeup_remote": 0.0}},
        "nic": {"queues": 2, "ring_size": 1024, "link_gbps": 100, "irq_affinity": [0, 1]},
        "kernel": {"rps_cpus": "c", "netdev_max_backlog": max_backlog},
        "traffic": {"groups": [{
            "name": "clients", "flows": REF_FLOWS, "proto": "udp",
            "src": {"cidr": "10.0.0.0/8"}, "dst": {"addr": "192.168.0.1"},
            "sport": {"range": [1024, 65535]}, "dport": {"value": 9000},
            "rate": {"pps": pps}, "arrivals": "poisson", "size": 64,
        }]},
        "apps": [{"name": "sink", "cpus": 4, "cost": {"user_ns": 0, "syscall_ns": 0},
                  "rcvbuf": 64 << 20, "batch": 1024}],
    }


def reference(duration: float, seed: int = 1, **kw) -> Scenario:
    return scenario_from_dict(reference_dict(duration, seed, **kw), "bench reference")


def flow_limit(quick: bool = False, duration: float | None = None) -> Scenario:
    """The flow-limit scenario (seed 003, antagonist + flow_limit), ``duration`` seconds."""
    from rxlab.repro.flow_limit import cases

    sc = {name: s for name, _params, s in cases(quick, None)}["antagonist+flow_limit"]
    return with_overrides(sc, {"duration": duration}) if duration else sc


ARFS_CASE = "hash-match/512"  # the seed's original driver: flow_id match, most churn


def arfs_flow_match(quick: bool = False, duration: float | None = None) -> Scenario | None:
    """The arfs-flow-match reproduction's ``hash-match/512`` case, if rxlab has it."""
    try:
        from rxlab.repro import EXPERIMENTS
    except ImportError:  # pragma: no cover
        return None
    mod = EXPERIMENTS.get("arfs-flow-match")
    if mod is None:
        return None
    found = {n: s for n, _p, s in mod.cases(quick, None)}
    if not found:
        return None
    pick = found.get(ARFS_CASE, next(iter(found.values())))
    return with_overrides(pick, {"duration": duration}) if duration else pick


def packets_per_second(sc: Scenario) -> float:
    """Offered packets per simulated second (the sum of the groups' mean rates)."""
    total = 0.0
    for g in sc.traffic.groups:
        stop = sc.duration if g.stop is None else min(g.stop, sc.duration)
        frac = max(0.0, stop - g.start) / sc.duration
        a = g.arrivals
        if a.process == "onoff":
            frac *= a.on_s / (a.on_s + a.off_s)
        total += g.rate.pps * frac
    return total
