"""The checks: each configures the lab, runs traffic on the real kernel, runs the same
configuration through the model, and compares (docs/kernel-check.md).

A check returns ``{"name", "status", "agree", "kernel", "model", "reason", "criteria"}``;
``criteria`` lists each comparison with both sides' values and whether it holds, and
``agree`` is true when all hold. Exact per-flow comparisons where the hash is known or
forced; fractions with the stated margins otherwise; never absolute packet rates.

Mutations (``--mutate``) give the model a deliberately wrong setting, to show that the
matching check can disagree:

* ``flow_limit_on_target``: the model's ``flow_limit_cpu_bitmap`` names the RPS target
  (cpu1) where the kernel's names the enqueuing CPU (cpu0);
* ``rps_low_bits``: the model picks ``cpus[hash % len]`` instead of reciprocal_scale;
* ``rfs_off``: the model runs without RFS tables;
* ``no_backlog_limit``: the model's ``netdev_max_backlog`` is 100000 instead of 64;
* ``cpumap_ignored``: the model's XDP rules pass every flow instead of redirecting;
* ``deferral_ignored``: the model's device defers no IRQ (napi_defer_hard_irqs 0);
* ``busy_poll_ignored``: the model's reader does not busy-poll (SO_BUSY_POLL 0).
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from rxlab.host import procfs
from rxlab.host.experiment import Bpf, Run, run_traffic, slow_consumer
from rxlab.host.guard import Sysctls
from rxlab.host.lab import Lab
from rxlab.kcheck import model, rates

MUTATIONS = {
    "flow_limit_on_target": "flow_limit_shedding",
    "rps_low_bits": "rps_cpu_choice",
    "rfs_off": "rfs_follows_thread",
    "no_backlog_limit": "backlog_drop_accounting",
    "cpumap_ignored": "cpumap_cpu_choice",
    "deferral_ignored": "irq_deferral",
    "busy_poll_ignored": "busy_read",
}
CPUS = [0, 1]
SEND_CPU, TARGET_CPU = 0, 1


@dataclass
class Ctx:
    lab: Lab
    sysctls: Sysctls
    duration: float = 1.0
    mutate: set[str] = field(default_factory=set)
    log: Callable[[str], None] = lambda _m: None
    cache: dict = field(default_factory=dict)
    bpf: list[Bpf] = field(default_factory=list)
    profile: dict | None = None  # a calibrated profile (rates.load), for the rate checks
    repeat: int = 3  # kernel runs per rate check

    def configure(self, *, rps_cpus: str = "0", rps_flow_cnt: int = 0, backlog: int = 1000,
                  flow_limit: str = "0", sock_flow_entries: int = 0) -> None:
        """Device and sysctl state for one experiment (everything else at rest)."""
        self.lab.reset_device()
        self.lab.set_rx_queues(rps_cpus, rps_flow_cnt)
        self.sysctls.set("netdev_max_backlog", backlog)
        self.sysctls.set("flow_limit_cpu_bitmap", flow_limit)
        self.sysctls.set("rps_sock_flow_entries", sock_flow_entries)

    def new_bpf(self) -> Bpf:
        b = Bpf(self.lab)
        self.bpf.append(b)
        return b

    def close_bpf(self) -> None:
        for b in self.bpf:
            b.close()
        self.bpf.clear()


class Criteria:
    def __init__(self):
        self.items: list[dict] = []

    def add(self, what: str, ok: bool, kernel=None, model=None) -> bool:
        self.items.append({"what": what, "ok": bool(ok), "kernel": kernel, "model": model})
        return bool(ok)

    def result(self, name: str, kernel: dict, model_: dict) -> dict:
        bad = [c["what"] for c in self.items if not c["ok"]]
        reason = ("all criteria hold" if not bad else "disagree: " + "; ".join(bad))
        return {"name": name, "status": "ran", "agree": not bad, "kernel": kernel,
                "model": model_, "reason": reason, "criteria": self.items}


def _r(x: float, n: int = 3) -> float:
    return round(float(x), n)


def _majority(counts: dict[int, int]) -> tuple[int, float]:
    tot = sum(counts.values())
    if not tot:
        return -1, 0.0
    cpu = max(counts, key=counts.get)
    return cpu, counts[cpu] / tot


def _cpus_with(sn: dict[int, dict[str, int]], key: str, floor: int = 1) -> list[int]:
    """CPUs whose counter ``key`` reached ``floor``."""
    return sorted(c for c, row in sn.items() if row.get(key, 0) >= floor)


def _rate(run: Run, ports: list[int]) -> float:
    return sum(run.sent[p] for p in ports) / max(run.seconds, 1e-3)


# --- rps_cpu_choice ----------------------------------------------------------------------------

def rps_cpu_choice(ctx: Ctx) -> dict:
    """16 flows, rps_cpus=3 on every rx queue; the sender's tc egress program forces each
    flow's skb->hash to the model's own flow hash; a tc ingress recorder logs the hash
    the receiver saw and the CPU that processed each packet; SO_INCOMING_CPU too."""
    ports = list(range(40000, 40016))
    low = "rps_low_bits" in ctx.mutate
    d = model.scenario([model.group("flows", ports, 150_000)], {"rps_cpus": "3"})
    hashes = model.flow_hashes(d)
    ctx.configure(rps_cpus="3")
    b = ctx.new_bpf()
    b.set_hashes(hashes)
    b.record()
    run = run_traffic(ctx.lab, ports, duration=ctx.duration, send_cpu=SEND_CPU,
                      recv_cpu=TARGET_CPU)
    rec = b.records()
    ctx.close_bpf()
    k_flows, m_flows = {}, {}
    for p in ports:
        r = rec.get(p, {"hashes": set(), "cpus": {}})
        cpu, share = _majority(r["cpus"])
        so_cpu, _ = _majority(run.samples[0].get(p, {}))
        k_flows[p] = {"hash": f"{min(r['hashes']):08x}" if r["hashes"] else None,
                      "hashes_seen": len(r["hashes"]), "cpu": cpu, "share": _r(share),
                      "so_incoming_cpu": so_cpu}
        m_flows[p] = {"hash": f"{hashes[p]:08x}", "cpu": model.rps_cpu(hashes[p], CPUS,
                                                                        low_bits=low)}
    # end to end: the same flows through the simulator, at the kernel's per-flow rate
    d["traffic"]["groups"][0]["rate"]["pps"] = _rate(run, ports)
    res = model.simulate(d)
    msn = model.softnet(res)
    # and each flow alone through the simulator: the CPU whose backlog processed it
    for p in ports:
        one = model.scenario([model.group("flow", [p], 20_000)], {"rps_cpus": "3"},
                             duration=0.01)
        sn = model.softnet(model.simulate(one))
        m_flows[p]["simulated_cpu"] = max(sn, key=lambda cpu: sn[cpu]["processed"])
    c = Criteria()
    forced = sum(k_flows[p]["hash"] == m_flows[p]["hash"] and k_flows[p]["hashes_seen"] == 1
                 for p in ports)
    c.add("the kernel saw the forced hash on every flow", forced == len(ports),
          f"{forced}/{len(ports)}", f"{len(ports)} hashes")
    same = sum(k_flows[p]["cpu"] == m_flows[p]["cpu"] for p in ports)
    c.add("each flow on the model's CPU (tc recorder)", same == len(ports),
          f"{same}/{len(ports)}", "cpus[reciprocal_scale(hash, 2)]")
    sim_same = sum(k_flows[p]["cpu"] == m_flows[p]["simulated_cpu"] for p in ports)
    c.add("each flow on the CPU the simulator processed it on", sim_same == len(ports),
          f"{sim_same}/{len(ports)}", "one simulate() per flow")
    so_same = sum(k_flows[p]["so_incoming_cpu"] == m_flows[p]["cpu"] for p in ports)
    c.add("SO_INCOMING_CPU equals the model's CPU", so_same == len(ports),
          f"{so_same}/{len(ports)}", None)
    k_share, m_share = run.processed_share(TARGET_CPU), model.processed_share(res, TARGET_CPU)
    c.add("cpu1 share of processed within 0.05", abs(k_share - m_share) <= 0.05,
          _r(k_share), _r(m_share))
    # received_rps counts IPIs (not packets); a handful elsewhere is other traffic
    k_rps = _cpus_with(run.softnet, "received_rps", floor=max(10, run.total_sent // 1000))
    m_rps = _cpus_with(msn, "received_rps", floor=max(10, res.data["packets"]["offered"]
                                                      // 1000))
    c.add("received_rps (IPIs) only on the remote target", k_rps == m_rps, k_rps, m_rps)
    kernel = {"flows": {str(p): v for p, v in k_flows.items()}, "sent": run.total_sent,
              "processed_share_cpu1": _r(k_share),
              "received_rps": {str(c_): r["received_rps"] for c_, r in run.softnet.items()}}
    mdl = {"flows": {str(p): v for p, v in m_flows.items()},
           "processed_share_cpu1": _r(m_share),
           "received_rps": {str(c_): r["received_rps"] for c_, r in msn.items()},
           "rule": "cpus[hash % len]" if low else "cpus[reciprocal_scale(hash, len)]"}
    return c.result("rps_cpu_choice", kernel, mdl)


# --- rps_flow_stickiness ---------------------------------------------------------------------

def rps_flow_stickiness(ctx: Ctx) -> dict:
    """16 connected flows, rps_cpus=3, the sockets' own (random) hashes: each flow stays
    on one CPU, both CPUs are used, and the kernel's hash (read by the recorder) gives
    the CPU the model's rule predicts."""
    ports = list(range(40100, 40116))
    low = "rps_low_bits" in ctx.mutate
    ctx.configure(rps_cpus="3")
    b = ctx.new_bpf()
    b.record()
    run = run_traffic(ctx.lab, ports, duration=ctx.duration, send_cpu=SEND_CPU,
                      recv_cpu=TARGET_CPU)
    rec = b.records()
    ctx.close_bpf()
    sticky = 0
    on_rule = 0
    k_flows = {}
    for p in ports:
        r = rec.get(p, {"hashes": set(), "cpus": {}, "hash_changes": 0})
        cpu, share = _majority(r["cpus"])
        so_cpu, so_share = _majority(run.samples[0].get(p, {}))
        one = share >= 0.99 and len(r["hashes"]) == 1 and so_share >= 0.99
        sticky += one
        h = min(r["hashes"]) if r["hashes"] else 0
        predicted = model.rps_cpu(h, CPUS, low_bits=low) if r["hashes"] else -1
        on_rule += predicted == cpu
        k_flows[str(p)] = {"hash": f"{h:08x}", "cpu": cpu, "share": _r(share),
                           "so_incoming_cpu": so_cpu, "model_cpu": predicted}
    k_used = sorted({v["cpu"] for v in k_flows.values() if v["cpu"] >= 0})
    d = model.scenario([model.group("flows", ports, _rate(run, ports))], {"rps_cpus": "3"})
    res = model.simulate(d)
    m_used = _cpus_with(model.softnet(res), "processed")
    m_reordered = res.data["reordered_packets"]
    c = Criteria()
    c.add(">= 15/16 flows on one CPU (recorder and SO_INCOMING_CPU), one hash each",
          sticky >= len(ports) - 1, f"{sticky}/{len(ports)}",
          "every flow (reordered packets 0)" if m_reordered == 0 else
          f"reordered packets {m_reordered}")
    c.add("the model's rule on the kernel's hash gives the kernel's CPU",
          on_rule == len(ports), f"{on_rule}/{len(ports)}",
          "cpus[hash % len]" if low else "cpus[reciprocal_scale(hash, len)]")
    c.add("both CPUs used", k_used == CPUS and m_used == CPUS, k_used, m_used)
    kernel = {"flows": k_flows, "sticky_flows": sticky, "cpus_used": k_used}
    mdl = {"reordered_packets": m_reordered, "cpus_used": m_used}
    return c.result("rps_flow_stickiness", kernel, mdl)


# --- rfs_follows_thread ------------------------------------------------------------------------

def rfs_follows_thread(ctx: Ctx) -> dict:
    """RFS (rps_sock_flow_entries 32768, rps_flow_cnt 4096, no RPS map), 8 connected
    flows; the receiver starts on cpu1 and moves itself to cpu0 half-way. The flows
    follow it: phase 1 processed on cpu1, phase 2 on cpu0."""
    ports = list(range(40200, 40208))
    settle = 0.1
    half = ctx.duration / 2 + 0.1  # the receiver's clock starts before the sender's
    ctx.configure(rps_flow_cnt=4096, sock_flow_entries=32768)
    run = run_traffic(ctx.lab, ports, duration=ctx.duration, send_cpu=SEND_CPU,
                      recv_cpu=1, migrate_at=half, migrate_to=0, settle=settle)

    def so_share(phase: int, cpu: int) -> float:
        tot = sum(n for d in run.samples[phase].values() for n in d.values())
        hit = sum(d.get(cpu, 0) for d in run.samples[phase].values())
        return hit / tot if tot else 0.0

    k1, k2 = so_share(0, 1), so_share(1, 0)
    ks1, ks2 = run.processed_share(1, 0), run.processed_share(0, 1)
    kernel_cfg = {} if "rfs_off" in ctx.mutate else {"rps_sock_flow_entries": 32768,
                                                     "rps_flow_cnt": 4096}
    dur = ctx.duration
    d = model.scenario([model.group("flows", ports, _rate(run, ports))], kernel_cfg,
                       app_cpu=1, duration=dur, migrate=[{"at": dur / 2, "cpu": 0}])
    res = model.simulate(d)
    m1 = model.softirq_share(res, 1, settle, dur / 2)
    m2 = model.softirq_share(res, 0, dur / 2 + settle, dur)
    c = Criteria()
    c.add("phase 1 (thread on cpu1): flows processed on cpu1 > 0.9", k1 > 0.9 and m1 > 0.9,
          _r(k1), _r(m1))
    c.add("phase 2 (thread moved to cpu0): flows processed on cpu0 > 0.9",
          k2 > 0.9 and m2 > 0.9, _r(k2), _r(m2))
    c.add("per-phase shares within 0.1", abs(k1 - m1) <= 0.1 and abs(k2 - m2) <= 0.1,
          [_r(k1), _r(k2)], [_r(m1), _r(m2)])
    kernel = {"phase1_cpu1_share_so_incoming_cpu": _r(k1),
              "phase2_cpu0_share_so_incoming_cpu": _r(k2),
              "phase1_cpu1_share_processed": _r(ks1), "phase2_cpu0_share_processed": _r(ks2),
              "sent": run.total_sent}
    mdl = {"phase1_cpu1_share": _r(m1), "phase2_cpu0_share": _r(m2), "rfs": res.data["rfs"],
           "thread_migrations": res.data["steering"]["thread_migrations"],
           "measure": "share of backlog-processing (softirq) time per phase"}
    return c.result("rfs_follows_thread", kernel, mdl)


# --- the slowed-consumer runs shared by flow_limit_shedding and backlog_drop_accounting ---------

HEAVY, LIGHT = [40300], [40301, 40302, 40303]
WEIGHTS = [8, 1, 1, 1]
BACKLOG = 64


def slow_run(ctx: Ctx, bitmap: str, recv_cpu: int = TARGET_CPU) -> Run:
    """RPS sends everything to cpu1, whose processing is slowed by 800 u32 filters;
    netdev_max_backlog 64; one heavy flow (8 sends per round) and three light ones.

    Two flow recorders count per flow where the model counts: tc egress on the sender
    veth (``run.recorded["tx"]``: what entered the receive path, the model's offered
    load) and tc ingress on the receiver veth after the u32 filters (``["rx"]``: what
    got past the backlog and was processed on cpu1). The receiving application itself
    is not where these checks measure: it shares cpu1 with the backlog processing,
    which keeps cpu1 100 % in softirq, so the process reads almost nothing until the
    traffic stops and each socket keeps only what its receive buffer holds (16 MiB,
    about 20 000 packets); the rest are UDP RcvbufErrors (``run.sockets``)."""
    key = ("slow", bitmap) if recv_cpu == TARGET_CPU else ("slow", bitmap, recv_cpu)
    if key not in ctx.cache:
        ctx.configure(rps_cpus="2", backlog=BACKLOG, flow_limit=bitmap)
        ctx.lab.add_clsact(ctx.lab.ns_rx, ctx.lab.dev_rx)
        slow_consumer(800)
        b = ctx.new_bpf()
        b.record(prio=1000, side="rx")  # after the 800 u32 filters (prio 1..800)
        b.record(side="tx")
        ctx.log(f"  slowed-consumer run, flow_limit_cpu_bitmap={bitmap}")
        run = run_traffic(ctx.lab, HEAVY + LIGHT, WEIGHTS, duration=ctx.duration,
                          send_cpu=SEND_CPU, recv_cpu=recv_cpu)
        run.recorded = {side: b.packets(side) for side in ("tx", "rx")}
        ctx.close_bpf()
        ctx.cache[key] = run
    return ctx.cache[key]


def _entered(run: Run, ports: list[int]) -> int:
    return sum(run.recorded["tx"].get(p, 0) for p in ports)


def _entered_rate(run: Run, ports: list[int]) -> float:
    """Packets per second of ``ports`` that entered the receive path (veth_xmit)."""
    return _entered(run, ports) / max(run.seconds, 1e-3)


def calibrated_cost(ctx: Ctx) -> float:
    """``stack_rx`` (ns) that makes the model's cpu1 process what the kernel's slowed
    cpu1 processed per second (flow limit off); one secant step on the model."""
    if "stack_rx" in ctx.cache:
        return ctx.cache["stack_rx"]
    run = slow_run(ctx, "0")
    k_rate = run.softnet[TARGET_CPU]["processed"] / max(run.seconds, 1e-3)
    guess = max(50.0, 1e9 / max(k_rate, 1.0) - 600.0)
    d = _slow_model(ctx, run, "0", guess, backlog=BACKLOG)
    res = model.simulate(d)
    m_rate = model.softnet(res)[TARGET_CPU]["processed"] / d["duration"]
    # the model's per-packet time on cpu1 is guess + fixed; scale the whole packet time
    fixed = 1e9 / max(m_rate, 1.0) - guess
    cost = max(50.0, 1e9 / max(k_rate, 1.0) - fixed)
    ctx.cache["stack_rx"] = cost
    return cost


def _slow_model(ctx: Ctx, run: Run, bitmap: str, stack_rx: float, backlog: int,
                app_cpu: int = SEND_CPU, duration: float | None = None) -> dict:
    """The model's offered load per group is what the kernel's recorder saw enter the
    receive path (equal to what the sender counted as sent, on every run so far)."""
    groups = [model.group("heavy", HEAVY, _entered_rate(run, HEAVY)),
              model.group("light", LIGHT, _entered_rate(run, LIGHT))]
    # The model's reader is on cpu0: the kernel's, on cpu1, reads nothing during the traffic
    # (each recv() runs cpu1's pending softirq inline, rxlab.kernel.socket
    # bh_enable_runs_softirq, and the model does the same), so these checks compare what
    # got past the backlog, which in the model is what a reader with CPU to spare reads.
    return model.scenario(groups, {"rps_cpus": "2", "netdev_max_backlog": backlog,
                                   "flow_limit_cpu_bitmap": bitmap},
                          app_cpu=app_cpu, duration=duration or min(ctx.duration, 0.5),
                          costs={"stack_rx": stack_rx})


def _share(counts: dict[int, int]) -> float:
    tot = sum(counts.get(p, 0) for p in HEAVY + LIGHT)
    return sum(counts.get(p, 0) for p in HEAVY) / tot if tot else 0.0


def _heavy_share_model(res, key: str = "delivered") -> float:
    g = res.data["flows_by_group"]
    tot = g["heavy"][key] + g["light"][key]
    return g["heavy"][key] / tot if tot else 0.0


# --- flow_limit_shedding --------------------------------------------------------------------

def flow_limit_shedding(ctx: Ctx) -> dict:
    """flow_limit_cpu_bitmap off / on the enqueuing CPU (cpu0) / on the RPS target (cpu1).

    Both sides are compared where flow limit acts: per flow, the packets that entered
    the receive path (kernel: tc egress recorder on the sender veth; model: offered) and
    the packets that got past the backlog and were processed on cpu1 (kernel: tc ingress
    recorder after the u32 filters; model: delivered, its application drops nothing).
    flow_limit_count and dropped per CPU from softnet_stat in both. What the kernel's
    starved receiving application read is reported, not compared (see ``slow_run``)."""
    cost = calibrated_cost(ctx)
    cases = {"off": "0", "enqueuing_cpu0": "1", "target_cpu1": "2"}
    k, m = {}, {}
    same_point = []
    for label, bitmap in cases.items():
        run = slow_run(ctx, bitmap)
        mb = bitmap
        if "flow_limit_on_target" in ctx.mutate and bitmap == "1":
            mb = "2"
        res = model.simulate(_slow_model(ctx, run, mb, cost, BACKLOG))
        msn = model.softnet(res)
        past = run.recorded["rx"]
        k_proc = run.softnet[TARGET_CPU]["processed"]
        k[label] = {"heavy_share": _r(_share(past)),
                    "heavy_entered_share": _r(_share(run.recorded["tx"])),
                    "heavy_send_share": _r(_share(run.sent)),
                    "entered_equals_sent": all(run.recorded["tx"].get(p, 0) == n
                                               for p, n in run.sent.items()),
                    "past_backlog": {str(p): past.get(p, 0) for p in HEAVY + LIGHT},
                    "cpu1_processed": k_proc,
                    "heavy_share_app": _r(_share(run.received)),
                    "app_received": {str(p): n for p, n in run.received.items()},
                    "socket_rcvbuf_drops": {str(p): s["drops"] for p, s in
                                            run.sockets.items()},
                    "flow_limit_count": {str(c): r["flow_limit_count"]
                                         for c, r in run.softnet.items()},
                    "dropped": {str(c): r["dropped"] for c, r in run.softnet.items()},
                    "bitmap": bitmap}
        pk = res.data["packets"]
        m[label] = {"heavy_share": _r(_heavy_share_model(res)),
                    "heavy_offered_share": _r(_heavy_share_model(res, "offered")),
                    "socket_rcvbuf_drops": pk["dropped_by_reason"]["socket_rcvbuf"],
                    "flow_limit_count": {str(c): r["flow_limit_count"] for c, r in msn.items()},
                    "dropped": {str(c): r["dropped"] for c, r in msn.items()},
                    "flow_limit_drops": pk["dropped_by_reason"]["flow_limit"],
                    "bitmap": mb}
        # kernel: the recorder saw every packet cpu1 processed (a handful of others,
        # e.g. neighbour traffic, are processed there too); model: nothing was lost
        # between the backlog and the application
        tot_past = sum(past.values())
        same_point.append((abs(k_proc - tot_past) <= max(10, 0.01 * k_proc),
                           m[label]["socket_rcvbuf_drops"] == 0))
    c = Criteria()
    ki = [k[x]["heavy_entered_share"] for x in cases]
    mi = [m[x]["heavy_offered_share"] for x in cases]
    c.add("same input: heavy share of what entered the receive path within 0.02 "
          "(kernel: tc egress recorder = sent; model: offered)",
          all(abs(a - b_) <= 0.02 for a, b_ in zip(ki, mi, strict=True))
          and all(k[x]["entered_equals_sent"] for x in cases), ki, mi)
    k_pt, m_pt = sum(a for a, _ in same_point), sum(b_ for _, b_ in same_point)
    c.add("same measuring point: past the backlog (kernel: tc ingress recorder = cpu1 "
          "processed within 1 %; model: no socket drops, delivered)",
          k_pt == m_pt == len(cases), f"{k_pt}/{len(cases)} runs", f"{m_pt}/{len(cases)} runs")
    ko, ke, kt = (k[x]["heavy_share"] for x in cases)
    mo, me, mt = (m[x]["heavy_share"] for x in cases)
    c.add("limit off: heavy share past the backlog near its share of what entered "
          "(within 0.1)",
          abs(ko - k["off"]["heavy_entered_share"]) <= 0.1
          and abs(mo - m["off"]["heavy_offered_share"]) <= 0.1, ko, mo)
    c.add("bitmap on the enqueuing CPU: heavy share falls by > 0.15",
          ke < ko - 0.15 and me < mo - 0.15, ke, me)
    c.add("heavy share with the limit on within 0.15", abs(ke - me) <= 0.15, ke, me)

    def where(side: dict, label: str, key: str) -> list[int]:
        # a handful of counts can come from other traffic on the machine
        floor = max(10, ctx.cache[("slow", cases[label])].total_sent // 1000)
        return sorted(int(cpu) for cpu, n in side[label][key].items() if n >= floor)

    kc, mc = where(k, "enqueuing_cpu0", "flow_limit_count"), where(m, "enqueuing_cpu0",
                                                                    "flow_limit_count")
    c.add("flow_limit_count lands on the enqueuing CPU", kc == mc == [SEND_CPU], kc, mc)
    kd, md = where(k, "enqueuing_cpu0", "dropped"), where(m, "enqueuing_cpu0", "dropped")
    c.add("dropped lands on the target CPU", kd == md == [TARGET_CPU], kd, md)
    ktc, mtc = where(k, "target_cpu1", "flow_limit_count"), where(m, "target_cpu1",
                                                                 "flow_limit_count")
    c.add("bitmap on the target CPU has no effect (count 0, share within 0.1 of off)",
          not ktc and not mtc and abs(kt - ko) <= 0.1 and abs(mt - mo) <= 0.1,
          {"count_cpus": ktc, "share": kt}, {"count_cpus": mtc, "share": mt})
    k["measured"] = ("heavy_share: share of the packets past the backlog (tc ingress "
                     "recorder after the u32 filters, on cpu1); heavy_share_app: what the "
                     "receiving process read, capped per socket by its receive buffer "
                     "because the process gets no CPU on cpu1 during the traffic")
    m["calibration"] = {"stack_rx_ns": round(cost, 1),
                        "offered": "per flow, the packets the kernel's tc egress recorder "
                                   "saw enter the receive path, per second"}
    return c.result("flow_limit_shedding", k, m)


# --- backlog_drop_accounting ---------------------------------------------------------------

def backlog_drop_accounting(ctx: Ctx) -> dict:
    """The slowed-consumer run without flow limit: backlog overflow drops. Kernel: one
    drop shows in softnet `dropped` of the target CPU, `rx_dropped` of the receiving veth
    and `tx_dropped` of the sending veth; sent = processed + dropped. Model: drops on
    the same CPU, the same share of the offered packets, conservation."""
    run = slow_run(ctx, "0")
    cost = calibrated_cost(ctx)
    backlog = 100_000 if "no_backlog_limit" in ctx.mutate else BACKLOG
    res = model.simulate(_slow_model(ctx, run, "0", cost, backlog))
    msn = model.softnet(res)
    pk = res.data["packets"]
    k_drop = sum(r["dropped"] for r in run.softnet.values())
    k_proc = sum(r["processed"] for r in run.softnet.values())
    rx_dropped = run.dev[ctx.lab.dev_rx]["rx_dropped"]
    tx_dropped = run.dev[ctx.lab.dev_tx]["tx_dropped"]
    sent = run.total_sent
    k_frac = k_drop / sent if sent else 0.0
    m_frac = pk["dropped_by_reason"]["backlog"] / pk["offered"] if pk["offered"] else 0.0
    floor = max(10, sent // 1000)
    k_where, m_where = _cpus_with(run.softnet, "dropped", floor), _cpus_with(msn, "dropped")
    c = Criteria()
    c.add("drops land on the target CPU only", k_where == m_where == [TARGET_CPU],
          k_where, m_where)
    tol = max(5, 0.01 * k_drop)
    c.add("kernel counts each drop three times (softnet, rx_dropped, tx_dropped)",
          k_drop > 0 and abs(k_drop - rx_dropped) <= tol and abs(k_drop - tx_dropped) <= tol,
          [k_drop, rx_dropped, tx_dropped],
          "one drop path: softnet dropped = dropped_by_reason.backlog")
    k_cons = abs(sent - k_proc - k_drop) / sent if sent else 1.0
    m_cons = pk["offered"] - pk["delivered"] - pk["dropped"] - pk["in_flight"]
    c.add("conservation: sent = processed + dropped (kernel within 2 %, model exact)",
          k_cons <= 0.02 and m_cons == 0, _r(k_cons, 4), m_cons)
    c.add("dropped share of sent within 0.1", abs(k_frac - m_frac) <= 0.1 and m_frac > 0,
          _r(k_frac), _r(m_frac))
    kernel = {"sent": sent, "processed": k_proc, "dropped_softnet": k_drop,
              "rx_dropped_rx_veth": rx_dropped, "tx_dropped_tx_veth": tx_dropped,
              "rx_packets_rx_veth": run.dev[ctx.lab.dev_rx]["rx_packets"],
              "dropped_cpus": k_where, "dropped_share": _r(k_frac)}
    mdl = {"offered": pk["offered"], "delivered": pk["delivered"],
           "dropped_by_reason": {k_: v for k_, v in pk["dropped_by_reason"].items() if v},
           "in_flight": pk["in_flight"], "dropped_cpus": m_where, "dropped_share": _r(m_frac),
           "netdev_max_backlog": backlog, "calibration": {"stack_rx_ns": round(cost, 1)}}
    return c.result("backlog_drop_accounting", kernel, mdl)


# --- reader_on_rps_cpu -----------------------------------------------------------------------

def _reader_figures(run: Run) -> dict:
    """cpu1's softirq and user time as shares of the sending time (/proc/stat ticks; the
    counters' window also holds 0.2 s after the traffic), the reader's own CPU time over
    the window (its rusage: without CONFIG_IRQ_TIME_ACCOUNTING the softirq it runs inline
    is its stime as well as /proc/stat's softirq), and its sockets' drops."""
    t = run.cpu_ticks.get(TARGET_CPU, {})
    ticks = max(1.0, run.send_seconds * os.sysconf("SC_CLK_TCK"))
    reader = run.recv_rusage.get("utime", 0.0) + run.recv_rusage.get("stime", 0.0)
    return {"cpu1_softirq": _r(min(1.0, t.get("softirq", 0) / ticks)),
            "cpu1_user": _r(t.get("user", 0) / ticks),
            "reader_cpu": _r(reader / max(run.window, 1e-3)),
            "socket_drops": sum(s["drops"] for s in run.sockets.values()),
            "sent": run.total_sent, "cpu1_ticks": t}


def _reader_model(res, cpu: int) -> dict:
    u = res.data["cpus"][cpu]["util"]
    return {"cpu1_softirq": _r(res.data["cpus"][TARGET_CPU]["util"]["softirq"]),
            "cpu1_user": _r(res.data["cpus"][TARGET_CPU]["util"]["user"]),
            # the reader's time on cpu1: the softirq it ran in its recv() and its own work
            "reader_cpu": _r(u["softirq"] - u["ksoftirqd"] + u["user"] + u["system"])
            if cpu == TARGET_CPU else _r(u["user"] + u["system"]),
            "socket_drops": res.data["packets"]["dropped_by_reason"]["socket_rcvbuf"]}


def running_version() -> str:
    from rxlab.host.export import _kernel_version
    return _kernel_version(platform.release())


def reader_unavailable() -> str | None:
    """The check's criteria are those of kernels whose local_bh_enable runs the softirq
    while ksoftirqd is awake; 4.9-6.4 defer to ksoftirqd instead."""
    from rxlab.kernel.versions import behaviour
    v = running_version()
    if behaviour(v).ksoftirqd_defers:
        return (f"Linux {v} defers pending softirqs to a running ksoftirqd (4.9-6.4): the "
                "reader is not starved there; this check's criteria are for 6.5+")
    return None


def reader_on_rps_cpu(ctx: Ctx) -> dict:
    """The slowed-consumer flood without flow limit (everything to cpu1 by RPS), the
    receiver pinned to cpu1, then to cpu0. On 6.5+ (and up to 4.8) each recv() runs cpu1's
    pending softirq inline (kernel/softirq.c __local_bh_enable_ip from __skb_recv_udp's
    spin_unlock_bh): the reader keeps about half of cpu1 but spends it on receive work,
    so cpu1 is all softirq and the reader's sockets overflow; on cpu0 it reads them."""
    same, other = slow_run(ctx, "0"), slow_run(ctx, "0", recv_cpu=SEND_CPU)
    cost = calibrated_cost(ctx)
    k = {"reader_cpu1": _reader_figures(same), "reader_cpu0": _reader_figures(other)}
    m = {}
    for label, run, cpu in (("reader_cpu1", same, TARGET_CPU), ("reader_cpu0", other, SEND_CPU)):
        # as long as the kernel's run: whether a socket overflows depends on it
        d = _slow_model(ctx, run, "0", cost, BACKLOG, app_cpu=cpu, duration=run.send_seconds)
        d["host"]["kernel"] = running_version()  # the rule is the running kernel's
        m[label] = _reader_model(model.simulate(d), cpu)
    ks, ms = k["reader_cpu1"], m["reader_cpu1"]
    c = Criteria()
    # user: the reader's own reads, mostly of its sockets once the flood stops (counted
    # against the sending time, as the softirq is)
    c.add("reader on cpu1: cpu1 is receive work while the flood lasts (softirq > 0.85, "
          "user < 0.15)", ks["cpu1_softirq"] > 0.85 and ks["cpu1_user"] < 0.15
          and ms["cpu1_softirq"] > 0.85 and ms["cpu1_user"] < 0.15,
          {"softirq": ks["cpu1_softirq"], "user": ks["cpu1_user"]},
          {"softirq": ms["cpu1_softirq"], "user": ms["cpu1_user"]})
    c.add("reader on cpu1 keeps about half of it, spent in its recv()'s softirq "
          "(0.3-0.7 of cpu1)", 0.3 <= ks["reader_cpu"] <= 0.7 and 0.3 <= ms["reader_cpu"] <= 0.7,
          ks["reader_cpu"], ms["reader_cpu"])
    kd = (ks["socket_drops"], k["reader_cpu0"]["socket_drops"])
    md = (ms["socket_drops"], m["reader_cpu0"]["socket_drops"])
    c.add("its sockets overflow on cpu1 and not on cpu0", kd[0] > 0 and kd[1] == 0
          and md[0] > 0 and md[1] == 0, list(kd), list(md))
    m["calibration"] = {"stack_rx_ns": round(cost, 1)}
    return c.result("reader_on_rps_cpu", k, m)


# --- ksoftirqd_share -------------------------------------------------------------------------

def ksoftirqd_share(ctx: Ctx) -> dict:
    """The slowed-consumer flood with the reader on cpu0 (reader_on_rps_cpu's second
    run): cpu1 does only receive work. Of its softirq time, the share ``ksoftirqd/1``
    runs (the kernel: that task's CPU time in /proc/PID/stat, all of it softirq, over
    cpu1's softirq ticks in /proc/stat; the model: ``util.ksoftirqd`` over
    ``util.softirq``), the rest inline at the exit of an interrupt (an RPS IPI, the
    tick). Which one runs it is kernel/softirq.c's rule: the restart window, then the
    hand-off to ksoftirqd, and an interrupt that finds NET_RX pending (6.5+)."""
    run = slow_run(ctx, "0", recv_cpu=SEND_CPU)
    cost = calibrated_cost(ctx)
    soft = run.cpu_ticks.get(TARGET_CPU, {}).get("softirq", 0)
    ks = run.ksoftirqd_ticks.get(TARGET_CPU, 0)
    k = {"cpu1_softirq_ticks": soft, "ksoftirqd1_ticks": ks,
         "ksoftirqd_share": _r(min(1.0, ks / soft) if soft else 0.0)}
    d = _slow_model(ctx, run, "0", cost, BACKLOG, app_cpu=SEND_CPU,
                    duration=run.send_seconds)
    d["host"]["kernel"] = running_version()
    res = model.simulate(d)
    u = res.data["cpus"][TARGET_CPU]["util"]
    m = {"cpu1_softirq": _r(u["softirq"]), "cpu1_ksoftirqd": _r(u["ksoftirqd"]),
         "ksoftirqd_share": _r(u["ksoftirqd"] / u["softirq"] if u["softirq"] else 0.0),
         "calibration": {"stack_rx_ns": round(cost, 1)}}
    c = Criteria()
    c.add("cpu1's softirq time ran in ksoftirqd/1 in the same share (within 0.15)",
          soft > 0 and abs(k["ksoftirqd_share"] - m["ksoftirqd_share"]) <= 0.15,
          k["ksoftirqd_share"], m["ksoftirqd_share"])
    return c.result("ksoftirqd_share", k, m)


# --- reader_threaded_napi --------------------------------------------------------------------

def threaded_run(ctx: Ctx, recv_cpu: int) -> Run:
    """The slowed-consumer flood (800 u32 filters at tc ingress of rxkc1, one heavy and
    three light flows) without RPS, the receiving veth in threaded NAPI mode with its
    ``napi/rxkc1-*`` kthreads pinned to cpu1: the filters and the whole stack run in the
    kthread's poll on cpu1. The receiver is pinned to ``recv_cpu``. ``run.napi_ticks``:
    the kthreads' CPU time over the run (/proc/PID/stat, clock ticks)."""
    key = ("threaded", recv_cpu)
    if key not in ctx.cache:
        ctx.configure(rps_cpus="0", backlog=BACKLOG)
        ctx.lab.add_clsact(ctx.lab.ns_rx, ctx.lab.dev_rx)
        slow_consumer(800)
        try:
            pids = ctx.lab.set_threaded(TARGET_CPU)
            ctx.log(f"  threaded-NAPI run, receiver on cpu{recv_cpu} ({len(pids)} kthreads)")
            t0 = sum(procfs.task_ticks(p) for p in pids)
            run = run_traffic(ctx.lab, HEAVY + LIGHT, WEIGHTS, duration=ctx.duration,
                              send_cpu=SEND_CPU, recv_cpu=recv_cpu)
            run.napi_ticks = sum(procfs.task_ticks(p) for p in pids) - t0
        finally:
            ctx.lab.reset_device()
        ctx.cache[key] = run
    return ctx.cache[key]


def _threaded_figures(run: Run) -> dict:
    """What the reader got of what was sent, cpu1's split over the sending time
    (/proc/stat) and the NAPI kthreads' share of the window (/proc/PID/stat)."""
    t = run.cpu_ticks.get(TARGET_CPU, {})
    hz = os.sysconf("SC_CLK_TCK")
    ticks = max(1.0, run.send_seconds * hz)
    return {"delivered_share": _r(sum(run.received.values()) / max(1, run.total_sent)),
            "cpu1_softirq": _r(min(1.0, t.get("softirq", 0) / ticks)),
            "cpu1_system": _r(min(1.0, t.get("system", 0) / ticks)),
            "cpu1_user": _r(t.get("user", 0) / ticks),
            "napi_thread_cpu": _r(run.napi_ticks / max(1.0, run.window * hz)),
            "socket_drops": sum(s["drops"] for s in run.sockets.values()),
            "sent": run.total_sent}


def _threaded_costs(run: Run) -> dict:
    """Per packet, from the run with the reader on cpu0: the reader's own CPU time (its
    rusage: a Python receiver's recv() and bookkeeping) and, reported only, the NAPI
    kthreads' (/proc/PID/stat; at light load it holds their wake-ups, which the model
    does not charge the kthread)."""
    hz = os.sysconf("SC_CLK_TCK")
    got = max(1, sum(run.received.values()))
    return {"kthread_ns": 1e9 * run.napi_ticks / hz / got,
            "reader_user_ns": 1e9 * run.recv_rusage.get("utime", 0.0) / got,
            "reader_sys_ns": 1e9 * run.recv_rusage.get("stime", 0.0) / got}


def _threaded_scenario(run: Run, stack_rx: float, costs: dict, app_cpu: int) -> dict:
    """The lab as a scenario: veth's NAPI (``rx_mode: napi``, its ring VETH_RING_SIZE
    256, drivers/net/veth.c) scheduled from the sender's cpu0, polled by the kthread on
    cpu1, the kernel's sent packets as the offered load."""
    rate = {p: run.sent.get(p, 0) / max(run.send_seconds, 1e-3) for p in HEAVY + LIGHT}
    groups = [model.group("heavy", HEAVY, sum(rate[p] for p in HEAVY)),
              model.group("light", LIGHT, sum(rate[p] for p in LIGHT))]
    d = model.scenario(groups, {"netdev_max_backlog": BACKLOG}, app_cpu=app_cpu,
                       duration=run.send_seconds, costs={"stack_rx": stack_rx})
    d["nic"].update(rx_mode="napi", ring_size=256, threaded=True,
                    napi_thread_affinity=[TARGET_CPU])
    d["apps"][0]["cost"] = {"user_ns": costs["reader_user_ns"],
                            "syscall_ns": costs["reader_sys_ns"]}
    d["host"]["kernel"] = running_version()
    return d


def _threaded_model(d: dict) -> dict:
    res = model.simulate(d)
    pk, u = res.data["packets"], res.data["cpus"][TARGET_CPU]["util"]
    return {"delivered_share": _r(pk["delivered"] / max(1, pk["offered"])),
            "cpu1_softirq": _r(u["softirq"]), "cpu1_system": _r(u["system"]),
            "cpu1_user": _r(u["user"]),
            "napi_thread_cpu": _r(res.data["queues"][0]["napi_thread_cpu_s"] / d["duration"]),
            "socket_drops": pk["dropped_by_reason"]["socket_rcvbuf"]}


def threaded_unavailable() -> str | None:
    if shutil.which("ethtool") is None:
        return ("needs ethtool: threaded NAPI on veth needs GRO on the receiving veth "
                "(apt-get install ethtool, scripts/setup-system.sh)")
    from rxlab.kernel.versions import behaviour
    v = running_version()
    if not behaviour(v).napi_threaded:
        return f"Linux {v} has no threaded NAPI (5.12+)"
    return None


def reader_threaded_napi(ctx: Ctx) -> dict:
    """The flood of ``reader_on_rps_cpu`` with its receive work in threaded-NAPI kthreads
    pinned to cpu1 instead of cpu1's softirq. The costs come from other runs: the
    per-packet stack cost from the RPS run (``calibrated_cost``, the same filters in
    softirq), the reader's per-packet CPU time from the threaded run with the reader on
    cpu0 (its rusage). The run with the receiver pinned to cpu1, beside the kthread, is
    the prediction: no NET_RX softirq is pending on cpu1, so the reader's recv() runs
    none, and the two share cpu1 as CFS tasks. Each run's offered load is what its
    sender sent."""
    stack = calibrated_cost(ctx)
    run0, run1 = threaded_run(ctx, SEND_CPU), threaded_run(ctx, TARGET_CPU)
    costs = _threaded_costs(run0)
    k = {"reader_cpu1": _threaded_figures(run1), "reader_cpu0": _threaded_figures(run0)}
    m = {"reader_cpu1": _threaded_model(_threaded_scenario(run1, stack, costs, TARGET_CPU)),
         "reader_cpu0": _threaded_model(_threaded_scenario(run0, stack, costs, SEND_CPU))}
    ks, ms = k["reader_cpu1"], m["reader_cpu1"]
    c = Criteria()
    c.add("the reader beside the kthread: delivered share of what was sent within 0.15 "
          "(in softirq it got under 1 %)", abs(ks["delivered_share"] - ms["delivered_share"])
          <= 0.15, ks["delivered_share"], ms["delivered_share"])
    c.add("cpu1's receive work is the kthread's system time, not softirq (softirq < 0.15, "
          "system > 0.6)", ks["cpu1_softirq"] < 0.15 and ks["cpu1_system"] > 0.6
          and ms["cpu1_softirq"] < 0.15 and ms["cpu1_system"] > 0.6,
          {"softirq": ks["cpu1_softirq"], "system": ks["cpu1_system"]},
          {"softirq": ms["cpu1_softirq"], "system": ms["cpu1_system"]})
    m["calibration"] = {"stack_rx_ns": round(stack, 1),
                        "reader_user_ns": round(costs["reader_user_ns"], 1),
                        "reader_sys_ns": round(costs["reader_sys_ns"], 1),
                        "from": "stack_rx: the RPS run (calibrated_cost); the reader: its "
                                "CPU time per packet with the reader on cpu0"}
    return c.result("reader_threaded_napi", k, m)


# --- cpumap_cpu_choice ----------------------------------------------------------------------

CPUMAP_PORTS = list(range(40400, 40408))
CPUMAP_REDIRECT = {40400: 1, 40401: 1, 40402: 1, 40403: 1, 40404: 0, 40405: 0}  # 40406-7 pass
CPUMAP_QSIZE = 192
NAPI_CPU = SEND_CPU  # veth's NAPI poll, where the XDP program runs: the sender's CPU
FORCED = {p: 0xC0DE0000 | i for i, p in enumerate(CPUMAP_PORTS)}  # the sender's skb->hash


def cpumap_unavailable() -> str | None:
    """Why ``cpumap_cpu_choice`` cannot run here, or None."""
    if shutil.which("ethtool") is None:
        return ("needs ethtool: the sender veth's tx checksum offload must be off for "
                "cpumap (apt-get install ethtool, scripts/setup-system.sh)")
    return None


UNAVAILABLE: dict[str, Callable[[], str | None]] = {"cpumap_cpu_choice": cpumap_unavailable,
                                                    "reader_on_rps_cpu": reader_unavailable,
                                                    "reader_threaded_napi": threaded_unavailable}


def _cpumap_run(ctx: Ctx, rps_rx0: str | None) -> tuple[Run, dict, dict, dict]:
    """Native XDP on rxkc1 redirecting by source port into a cpumap (entries for cpu0
    and cpu1, qsize 192); the sender's tc egress forces each flow's skb->hash to
    ``FORCED``; recorders at the sender's tc egress and the receiver's tc ingress (which
    runs on the cpumap CPU, after the kthread rebuilt the skb). ``rps_rx0``: rps_cpus of
    rx-0 only, the map the kernel consults for cpumap skbs (no rx queue recorded)."""
    ctx.configure(rps_cpus=[rps_rx0 or "0", "0", "0", "0"])
    try:
        ctx.lab.tx_offload_off()
        b = ctx.new_bpf()
        b.set_hashes(FORCED)
        b.record(side="tx")
        b.record(side="rx")
        b.cpumap_redirect(CPUMAP_REDIRECT, CPUS, CPUMAP_QSIZE)
        ctx.log(f"  cpumap run, rx-0 rps_cpus={rps_rx0 or 0}")
        run = run_traffic(ctx.lab, CPUMAP_PORTS, duration=ctx.duration, send_cpu=SEND_CPU,
                          recv_cpu=TARGET_CPU)
        rx, tx, cm = b.records("rx"), b.records("tx"), b.cpumap_counts()
    finally:
        ctx.close_bpf()
        problems = ctx.lab.restore_tx_offload()
    if problems:
        raise RuntimeError("; ".join(problems))
    return run, rx, tx, cm


def _cpumap_model(ctx: Ctx, run: Run | None, rps: str | None) -> dict:
    redirect = dict(CPUMAP_REDIRECT)
    d = model.cpumap_scenario([model.group("flows", CPUMAP_PORTS, 20_000)], redirect, CPUS,
                              qsize=CPUMAP_QSIZE, rps_cpus=rps)
    if "cpumap_ignored" in ctx.mutate:  # the wrong model: the program passes everything
        for rule in d["xdp"]["rules"]:
            rule["action"] = "pass"
            del rule["cpus"]
    if run is not None:
        d["traffic"]["groups"][0]["rate"]["pps"] = _rate(run, CPUMAP_PORTS)
    return d


def cpumap_cpu_choice(ctx: Ctx) -> dict:
    """XDP cpumap redirect on the receiving veth: 6 of 8 flows redirected by source port
    (4 to cpu1, 2 to cpu0), 2 passed. Kernel: per flow the CPU the tc ingress recorder
    saw it on and the skb->hash there, cpumap enqueue/kthread tracepoint sums. Model: the
    same scenario (xdp rules, cpumap entries), each flow alone through simulate() and the
    rule's CPU. Second run: RPS on rx-0 after the hop (rps_cpus=3): each redirected flow
    sticks to one CPU of the set, chosen by the software hash the kernel computed."""
    rows = {}
    for label, rps in (("cpumap", None), ("cpumap_then_rps", "3")):
        run, rx, tx, cm = _cpumap_run(ctx, rps)
        d = _cpumap_model(ctx, run, rps)
        res = model.simulate(d)
        sims = {}
        for p in CPUMAP_PORTS:  # each flow alone: the CPU whose stack processed it
            one = _cpumap_model(ctx, None, rps)
            one["traffic"]["groups"] = [model.group("flow", [p], 20_000)]
            one["duration"] = 0.01
            sn = model.softnet(model.simulate(one))
            sims[p] = max(sn, key=lambda cpu: sn[cpu]["processed"])
        flows = {}
        for p in CPUMAP_PORTS:
            r = rx.get(p, {"hashes": set(), "cpus": {}})
            t = tx.get(p, {"hashes": set(), "cpus": {}})
            cpu, share = _majority(r["cpus"])
            h = min(r["hashes"]) if r["hashes"] else None
            flows[p] = {"redirect": CPUMAP_REDIRECT.get(p, "pass"), "cpu": cpu,
                        "share": _r(share), "packets": sum(r["cpus"].values()),
                        "entered": sum(t["cpus"].values()),
                        "hash_sent": sorted(f"{x:08x}" for x in t["hashes"]),
                        "hashes_seen": len(r["hashes"]),
                        "hash": f"{h:08x}" if h is not None else None,
                        "rps_rule_cpu": model.rps_cpu(h, CPUS) if h is not None else -1,
                        "model_rule_cpu": model.cpumap_rule_cpu(d, p, NAPI_CPU),
                        "model_hash": model.cpumap_hash_after(d, p),
                        "model_simulated_cpu": sims[p]}
        rows[label] = {"run": run, "flows": flows, "cpumap": cm, "res": res}
    return _cpumap_compare(ctx, rows)


def _count_values(d: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in d.values():
        out[v] = out.get(v, 0) + 1
    return out


def _cpumap_compare(ctx: Ctx, rows: dict) -> dict:
    c = Criteria()
    red = sorted(CPUMAP_REDIRECT)
    f0 = rows["cpumap"]["flows"]
    sent_ok = sum(f0[p]["hash_sent"] == [f"{FORCED[p]:08x}"] for p in CPUMAP_PORTS)
    c.add("the sender forced its hash on every flow (tc egress recorder)",
          sent_ok == len(CPUMAP_PORTS), f"{sent_ok}/{len(CPUMAP_PORTS)}", "hash_setter")
    # 1. each flow entirely on the cpumap CPU the program chose (passed: the NAPI CPU)
    k_on = sum(f0[p]["share"] == 1.0 and f0[p]["cpu"] == CPUMAP_REDIRECT.get(p, NAPI_CPU)
               for p in CPUMAP_PORTS)
    m_rule = sum(f0[p]["model_rule_cpu"] == f0[p]["cpu"] for p in CPUMAP_PORTS)
    m_sim = sum(f0[p]["model_simulated_cpu"] == f0[p]["cpu"] for p in CPUMAP_PORTS)
    c.add("each flow entirely on the cpumap CPU its rule names (passed flows: the NAPI CPU)",
          k_on == m_rule == m_sim == len(CPUMAP_PORTS), f"{k_on}/{len(CPUMAP_PORTS)}",
          {"rule": f"{m_rule}/{len(CPUMAP_PORTS)}",
           "simulated": f"{m_sim}/{len(CPUMAP_PORTS)}"})
    # 2. the hash: lost in the xdp_frame -> skb rebuild, kept by XDP_PASS
    def k_hash(p: int) -> str:
        f = f0[p]
        if f["hashes_seen"] != 1:
            return f"{f['hashes_seen']} hashes"
        return ("none" if f["hash"] == "00000000" else
                "kept" if f["hash"] == f"{FORCED[p]:08x}" else "other")

    k_h = {str(p): k_hash(p) for p in CPUMAP_PORTS}
    m_h = {str(p): f0[p]["model_hash"] for p in CPUMAP_PORTS}
    c.add("hash after XDP: redirected flows none (skb->hash 0), passed flows the sender's",
          k_h == m_h, _count_values(k_h), _count_values(m_h))
    # 3. counters: cpumap deliveries are softnet `processed` on the cpumap CPU
    run, cm, res = rows["cpumap"]["run"], rows["cpumap"]["cpumap"], rows["cpumap"]["res"]
    floor = max(10, run.total_sent // 1000)
    kk = {cpu: e["processed"] for cpu, e in cm["kthread"].items()}
    k_acc = all(cm["enqueue"].get(cpu, {}).get("processed", 0)
                - cm["enqueue"].get(cpu, {}).get("drops", 0) == kk.get(cpu, 0)
                for cpu in CPUS)
    k_rec = {cpu: sum(f0[p]["packets"] for p in red if CPUMAP_REDIRECT[p] == cpu)
             for cpu in CPUS}
    k_ok = (k_acc and all(abs(k_rec[cpu] - kk.get(cpu, 0)) <= floor for cpu in CPUS)
            and abs(run.softnet[TARGET_CPU]["processed"] - kk.get(TARGET_CPU, 0)) <= floor)
    mc = model.cpumap_counters(res)
    msn = model.softnet(res)
    m_ok = (all(e["kthread_processed"] <= e["enqueued"] for e in mc.values())
            and msn[TARGET_CPU]["processed"] == mc.get(TARGET_CPU, {}).get(
                "kthread_processed", -1))
    c.add("cpumap accounting: enqueued - drops = kthread processed = recorded on that CPU "
          "= cpu1 softnet processed", k_ok and m_ok,
          {"kthread": kk, "recorded": k_rec,
           "cpu1_processed": run.softnet[TARGET_CPU]["processed"]},
          {"kthread": {cpu: e["kthread_processed"] for cpu, e in mc.items()},
           "cpu1_processed": msn[TARGET_CPU]["processed"]})
    # 4. RPS on rx-0 after the hop
    f1 = rows["cpumap_then_rps"]["flows"]
    sticky = sum(f1[p]["share"] == 1.0 and f1[p]["hashes_seen"] == 1 for p in red)
    new_hash = sum(f1[p]["hash"] not in (None, "00000000", f"{FORCED[p]:08x}") for p in red)
    on_rule = sum(f1[p]["cpu"] == f1[p]["rps_rule_cpu"] for p in red)
    in_set = sum(f1[p]["model_simulated_cpu"] in CPUS for p in red)
    c.add("RPS after the hop: each redirected flow on one CPU of rx-0's set, with one "
          "new software hash", sticky == new_hash == len(red) and in_set == len(red),
          {"sticky": f"{sticky}/{len(red)}", "new_hash": f"{new_hash}/{len(red)}"},
          {"simulated_in_set": f"{in_set}/{len(red)}", "set": CPUS})
    c.add("RPS after the hop: the model's RPS rule on the kernel's new hash gives the "
          "kernel's CPU (rx-0's map)", on_rule == len(red), f"{on_rule}/{len(red)}",
          "reciprocal_scale(hash, 2) indexes rx-0's cpus")
    moved = sum(f1[p]["cpu"] != CPUMAP_REDIRECT[p] for p in red)
    kernel, mdl = {}, {}
    for label, row in rows.items():
        run = row["run"]
        kernel[label] = {
            "flows": {str(p): {k: v for k, v in f.items() if not k.startswith("model")}
                      for p, f in row["flows"].items()},
            "cpumap": {kind: {str(cpu): e for cpu, e in v.items()}
                       for kind, v in row["cpumap"].items()},
            "processed": {str(c_): r["processed"] for c_, r in run.softnet.items()},
            "sent": run.total_sent, "received": sum(run.received.values()),
            "udp_in_csum_errors": run.udp.get("InCsumErrors", 0)}
        mdl[label] = {
            "flows": {str(p): {"rule_cpu": f["model_rule_cpu"], "hash": f["model_hash"],
                               "simulated_cpu": f["model_simulated_cpu"]}
                      for p, f in row["flows"].items()},
            "cpumap": {str(cpu): e for cpu, e in model.cpumap_counters(row["res"]).items()},
            "processed": {str(c_): r["processed"]
                          for c_, r in model.softnet(row["res"]).items()}}
    kernel["cpumap_then_rps"]["moved_by_rps"] = moved
    mdl["note"] = ("per-flow CPUs and counter identities are compared; cpumap enqueue "
                   "drop counts are not (they depend on how fast each kthread runs, "
                   "which is not calibrated)")
    if "cpumap_ignored" in ctx.mutate:
        mdl["mutation"] = "cpumap_ignored: the model's XDP rules pass every flow"
    return c.result("cpumap_cpu_choice", kernel, mdl)


# --- irq_deferral ------------------------------------------------------------------------

DEFER_PORTS = [40500]
DEFER_PPS = 500.0  # the paced sender wakes once a packet: 2 ms apart, no burst
# (napi_defer_hard_irqs, gro_flush_timeout ns): none; a timer that always finds the next
# packet within its 10 empty polls; two and one empty 200 us polls after each packet
DEFER_SETTINGS = ((0, 0), (10, 1_000_000), (2, 200_000), (1, 200_000))


def deferral_unavailable() -> str | None:
    if shutil.which("ethtool") is None:
        return ("needs ethtool: veth has a NAPI (and so IRQ deferral) only with GRO on the "
                "receiving veth (apt-get install ethtool, scripts/setup-system.sh)")
    from rxlab.kernel.versions import behaviour
    v = running_version()
    if not behaviour(v).napi_defer_hard_irqs:
        return f"Linux {v} has no napi_defer_hard_irqs (5.8+)"
    return None


def _set_deferral(ctx: Ctx, defer: int, timeout: int) -> None:
    base = f"/sys/class/net/{ctx.lab.dev_rx}/"
    ctx.lab.write_rx_files([(base + "napi_defer_hard_irqs", str(defer)),
                            (base + "gro_flush_timeout", str(timeout))])


def deferral_run(ctx: Ctx, defer: int, timeout: int) -> tuple[Run, int]:
    """The paced sender's single flow into rxkc1 with GRO on (veth's NAPI, scheduled by
    the sender's xmit on cpu0, as a device IRQ would), the device's deferral set; returns
    the run and how often NET_RX ran on cpu0 meanwhile (/proc/softirqs)."""
    ctx.configure(rps_cpus="0")
    ctx.lab.set_gro(True)
    ctx.lab.tx_offload_off()
    _set_deferral(ctx, defer, timeout)
    try:
        ctx.log(f"  deferral run: napi_defer_hard_irqs {defer}, gro_flush_timeout {timeout}")
        n0 = procfs.softirqs()
        run = run_traffic(ctx.lab, DEFER_PORTS, duration=ctx.duration, send_cpu=SEND_CPU,
                          recv_cpu=TARGET_CPU, pps=DEFER_PPS)
        n1 = procfs.softirqs()
    finally:
        _set_deferral(ctx, 0, 0)
        ctx.lab.set_gro(False)
        ctx.lab.reset_device()
    return run, n1.get(SEND_CPU, 0) - n0.get(SEND_CPU, 0)


def _deferral_model(ctx: Ctx, run: Run, defer: int, timeout: int) -> dict:
    """The run as a scenario: the sent packets evenly spaced (the sender's pacing), veth's
    NAPI on cpu0 (``rx_mode: napi``, VETH_RING_SIZE 256), the same deferral; NET_RX runs
    are the polls the device IRQ and the hrtimer started."""
    rate = run.total_sent / max(run.send_seconds, 1e-3)
    g = model.group("rr", DEFER_PORTS, rate)
    g["arrivals"] = "constant"
    d = model.scenario([g], {}, app_cpu=TARGET_CPU, duration=run.send_seconds)
    if "deferral_ignored" in ctx.mutate:
        defer = 0
    d["nic"].update(rx_mode="napi", ring_size=256, napi_defer_hard_irqs=defer,
                    gro_flush_timeout=timeout)
    d["host"]["kernel"] = running_version()
    res = model.simulate(d)
    q, n = res.data["queues"][0], max(1, res.data["packets"]["offered"])
    return {"net_rx_per_packet": _r((q["irqs"] + q["timer_polls"]) / n),
            "irqs_per_packet": _r(q["irqs"] / n), "timer_polls_per_packet":
                _r(q["timer_polls"] / n)}


def irq_deferral(ctx: Ctx) -> dict:
    """IRQ deferral as napi_complete_done and napi_watchdog run it: per packet, how often
    NET_RX runs on the CPU that schedules veth's NAPI, with each deferral setting. No
    cost enters the count; the model's figure is its device interrupts plus its hrtimer
    polls for the packets the kernel's sender sent."""
    k, m = {}, {}
    c = Criteria()
    for defer, timeout in DEFER_SETTINGS:
        name = f"defer{defer}_{timeout // 1000}us"
        run, net_rx = deferral_run(ctx, defer, timeout)
        k[name] = {"net_rx_per_packet": _r(net_rx / max(1, run.total_sent)),
                   "sent": run.total_sent, "received": sum(run.received.values()),
                   "sender_wakeups": int(run.send_pacing.get("sleeps", 0))}
        m[name] = _deferral_model(ctx, run, defer, timeout)
        kv, mv = k[name]["net_rx_per_packet"], m[name]["net_rx_per_packet"]
        c.add(f"{name}: NET_RX runs per packet within 15 %", abs(kv - mv) <= 0.15 * mv,
              kv, mv)
    return c.result("irq_deferral", k, m)


# --- busy_read ---------------------------------------------------------------------------

BUSY_PORTS = [40600]
BUSY_PPS = 500.0  # paced: a packet every 2 ms
# SO_BUSY_POLL us: none; a loop that times out well before the next packet (each read
# then spins 200 x 1.024 us and sleeps); one that spans the gap (the reader polls every
# packet itself)
BUSY_SETTINGS = (0, 200, 5000)


def busy_unavailable() -> str | None:
    if shutil.which("ethtool") is None:
        return ("needs ethtool: veth has a NAPI (and so a NAPI id to busy-poll) only with "
                "GRO on the receiving veth (apt-get install ethtool, "
                "scripts/setup-system.sh)")
    from rxlab.kernel.versions import behaviour
    v = running_version()
    if not behaviour(v).busy_poll:
        return f"Linux {v}: rxlab models socket busy polling from 4.10"
    if not os.path.exists("/proc/sys/net/core/busy_read"):
        return "kernel built without CONFIG_NET_RX_BUSY_POLL (no net.core.busy_read)"
    return None


def busy_run(ctx: Ctx, usec: int) -> Run:
    """The paced sender's single flow into rxkc1 with GRO on (veth's NAPI, scheduled by
    the sender's xmit on cpu0), read by blocking recv calls on a socket with SO_BUSY_POLL
    ``usec`` on cpu1."""
    ctx.configure(rps_cpus="0")
    ctx.lab.set_gro(True)
    ctx.lab.tx_offload_off()
    try:
        ctx.log(f"  busy-poll run: SO_BUSY_POLL {usec} us")
        return run_traffic(ctx.lab, BUSY_PORTS, duration=ctx.duration, send_cpu=SEND_CPU,
                           recv_cpu=TARGET_CPU, pps=BUSY_PPS, busy_poll=usec)
    finally:
        ctx.lab.set_gro(False)
        ctx.lab.reset_device()


def _busy_model(ctx: Ctx, run: Run, usec: int) -> dict:
    """The run as a scenario: evenly spaced packets, veth's NAPI on cpu0 (``rx_mode:
    napi``, VETH_RING_SIZE 256), the reader on cpu1 with the same SO_BUSY_POLL."""
    rate = run.total_sent / max(run.send_seconds, 1e-3)
    g = model.group("rr", BUSY_PORTS, rate)
    g["arrivals"] = "constant"
    d = model.scenario([g], {}, app_cpu=TARGET_CPU, duration=run.send_seconds)
    d["nic"].update(rx_mode="napi", ring_size=256)
    d["host"]["kernel"] = running_version()
    d["apps"][0]["busy_poll"] = 0 if "busy_poll_ignored" in ctx.mutate else usec
    res = model.simulate(d)
    n = max(1, res.data["packets"]["delivered"])
    app = res.data["apps"][0]
    return {"busy_poll_share": _r(app.get("busy_poll_packets", 0) / n),
            "loop_us_per_packet": _r(app.get("busy_poll_s", 0.0) / n * 1e6)}


def busy_read(ctx: Ctx) -> dict:
    """Socket busy polling as sk_busy_loop and __napi_busy_loop run it: the share of the
    received packets the reader's own busy polls took (TcpExt BusyPollRxPackets of the
    receiving namespace against the model's), and the reader's CPU time per packet beyond
    the run without busy polling (getrusage utime + stime, which adds up to the task's
    exact runtime; their split is sampled by ticks, so only the sum is compared) against
    the model's busy-loop time per packet (~busy_poll x 1.024 us a read when the loop
    times out). No cost is set from these runs."""
    k, m = {}, {}
    c = Criteria()
    base = 0.0
    for usec in BUSY_SETTINGS:
        name = f"busy_poll_{usec}us"
        run = busy_run(ctx, usec)
        got = max(1, sum(run.received.values()))
        cpu_us = (run.recv_rusage.get("utime", 0.0) + run.recv_rusage.get("stime", 0.0)) / got
        cpu_us *= 1e6
        base = base if usec else cpu_us  # BUSY_SETTINGS starts without busy polling
        k[name] = {"busy_poll_share": _r(run.netstat.get("TcpExt.BusyPollRxPackets", 0) / got),
                   "cpu_us_per_packet": _r(cpu_us),
                   "loop_us_per_packet": _r(cpu_us - base),
                   "sent": run.total_sent, "received": got}
        m[name] = _busy_model(ctx, run, usec)
        kv, mv = k[name]["busy_poll_share"], m[name]["busy_poll_share"]
        c.add(f"{name}: busy-polled share of the packets within 0.1", abs(kv - mv) <= 0.1,
              kv, mv)
        if usec:
            ks, ms = k[name]["loop_us_per_packet"], m[name]["loop_us_per_packet"]
            c.add(f"{name}: reader's CPU time per packet beyond the run without busy "
                  "polling within 15 % of the model's busy-loop time",
                  abs(ks - ms) <= 0.15 * ms, ks, ms)
    return c.result("busy_read", k, m)


CHECKS: dict[str, Callable[[Ctx], dict]] = {
    "rps_cpu_choice": rps_cpu_choice,
    "rps_flow_stickiness": rps_flow_stickiness,
    "rfs_follows_thread": rfs_follows_thread,
    "flow_limit_shedding": flow_limit_shedding,
    "backlog_drop_accounting": backlog_drop_accounting,
    "reader_on_rps_cpu": reader_on_rps_cpu,
    "reader_threaded_napi": reader_threaded_napi,
    "ksoftirqd_share": ksoftirqd_share,
    "cpumap_cpu_choice": cpumap_cpu_choice,
    "irq_deferral": irq_deferral,
    "busy_read": busy_read,
    **rates.CHECKS,
    "latency_percentiles": lambda _ctx: skipped("latency_percentiles",
                                                rates.LATENCY_NOT_CHECKED),
}
NEEDS_PROFILE = set(rates.CHECKS)
# kernel features (rxlab.host.caps) a check needs beyond the lab's own (guard.LAB_NEEDS);
# a kernel without one skips the check with the cause
NEEDS: dict[str, tuple[str, ...]] = {"flow_limit_shedding": ("flow_limit",)}
UNAVAILABLE["latency_percentiles"] = lambda: rates.LATENCY_NOT_CHECKED
UNAVAILABLE["irq_deferral"] = deferral_unavailable
UNAVAILABLE["busy_read"] = busy_unavailable


def skipped(name: str, reason: str) -> dict:
    return {"name": name, "status": "skipped", "agree": False, "kernel": {}, "model": {},
            "reason": reason}
