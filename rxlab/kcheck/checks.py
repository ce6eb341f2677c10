"""The checks: each configures the lab, runs traffic on the real kernel, runs the same
configuration through the model, and compares (kernel-lab.md sec. 13-14).

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
* ``no_backlog_limit``: the model's ``netdev_max_backlog`` is 100000 instead of 64.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from rxlab.kcheck import model
from rxlab.kcheck.host import DEV_RX, DEV_TX, NS_RX, Lab, Sysctls
from rxlab.kcheck.kernel import Bpf, Run, run_traffic, slow_consumer

MUTATIONS = {
    "flow_limit_on_target": "flow_limit_shedding",
    "rps_low_bits": "rps_cpu_choice",
    "rfs_off": "rfs_follows_thread",
    "no_backlog_limit": "backlog_drop_accounting",
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


def slow_run(ctx: Ctx, bitmap: str) -> Run:
    """RPS sends everything to cpu1, whose processing is slowed by 800 u32 filters;
    netdev_max_backlog 64; one heavy flow (8 sends per round) and three light ones."""
    key = ("slow", bitmap)
    if key not in ctx.cache:
        ctx.configure(rps_cpus="2", backlog=BACKLOG, flow_limit=bitmap)
        ctx.lab.add_clsact(NS_RX, DEV_RX)
        slow_consumer(800)
        ctx.log(f"  slowed-consumer run, flow_limit_cpu_bitmap={bitmap}")
        ctx.cache[key] = run_traffic(ctx.lab, HEAVY + LIGHT, WEIGHTS, duration=ctx.duration,
                                     send_cpu=SEND_CPU, recv_cpu=TARGET_CPU)
    return ctx.cache[key]


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


def _slow_model(ctx: Ctx, run: Run, bitmap: str, stack_rx: float, backlog: int) -> dict:
    groups = [model.group("heavy", HEAVY, _rate(run, HEAVY)),
              model.group("light", LIGHT, _rate(run, LIGHT))]
    return model.scenario(groups, {"rps_cpus": "2", "netdev_max_backlog": backlog,
                                   "flow_limit_cpu_bitmap": bitmap},
                          duration=min(ctx.duration, 0.5), costs={"stack_rx": stack_rx})


def _heavy_share_kernel(run: Run) -> float:
    tot = sum(run.received.values())
    return sum(run.received[p] for p in HEAVY) / tot if tot else 0.0


def _heavy_share_model(res) -> float:
    g = res.data["flows_by_group"]
    tot = g["heavy"]["delivered"] + g["light"]["delivered"]
    return g["heavy"]["delivered"] / tot if tot else 0.0


# --- flow_limit_shedding --------------------------------------------------------------------

def flow_limit_shedding(ctx: Ctx) -> dict:
    """flow_limit_cpu_bitmap off / on the enqueuing CPU (cpu0) / on the RPS target (cpu1).
    Kernel: the heavy flow's share of what the receiver got, flow_limit_count and
    dropped per CPU. Model: the same, with the model's bitmap (see ``--mutate``)."""
    cost = calibrated_cost(ctx)
    cases = {"off": "0", "enqueuing_cpu0": "1", "target_cpu1": "2"}
    k, m = {}, {}
    for label, bitmap in cases.items():
        run = slow_run(ctx, bitmap)
        mb = bitmap
        if "flow_limit_on_target" in ctx.mutate and bitmap == "1":
            mb = "2"
        res = model.simulate(_slow_model(ctx, run, mb, cost, BACKLOG))
        msn = model.softnet(res)
        k[label] = {"heavy_share": _r(_heavy_share_kernel(run)),
                    "heavy_send_share": _r(sum(run.sent[p] for p in HEAVY) / run.total_sent),
                    "flow_limit_count": {str(c): r["flow_limit_count"]
                                         for c, r in run.softnet.items()},
                    "dropped": {str(c): r["dropped"] for c, r in run.softnet.items()},
                    "bitmap": bitmap}
        m[label] = {"heavy_share": _r(_heavy_share_model(res)),
                    "flow_limit_count": {str(c): r["flow_limit_count"] for c, r in msn.items()},
                    "dropped": {str(c): r["dropped"] for c, r in msn.items()},
                    "flow_limit_drops": res.data["packets"]["dropped_by_reason"]["flow_limit"],
                    "bitmap": mb}
    c = Criteria()
    ko, ke, kt = (k[x]["heavy_share"] for x in cases)
    mo, me, mt = (m[x]["heavy_share"] for x in cases)
    c.add("limit off: heavy share near its send share (within 0.1)",
          abs(ko - k["off"]["heavy_send_share"]) <= 0.1
          and abs(mo - k["off"]["heavy_send_share"]) <= 0.1, ko, mo)
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
    m["calibration"] = {"stack_rx_ns": round(cost, 1),
                        "offered": "the kernel sender's per-flow rates"}
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
    rx_dropped = run.dev[DEV_RX]["rx_dropped"]
    tx_dropped = run.dev[DEV_TX]["tx_dropped"]
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
              "rx_packets_rx_veth": run.dev[DEV_RX]["rx_packets"],
              "dropped_cpus": k_where, "dropped_share": _r(k_frac)}
    mdl = {"offered": pk["offered"], "delivered": pk["delivered"],
           "dropped_by_reason": {k_: v for k_, v in pk["dropped_by_reason"].items() if v},
           "in_flight": pk["in_flight"], "dropped_cpus": m_where, "dropped_share": _r(m_frac),
           "netdev_max_backlog": backlog, "calibration": {"stack_rx_ns": round(cost, 1)}}
    return c.result("backlog_drop_accounting", kernel, mdl)


# --- cpumap_cpu_choice ----------------------------------------------------------------------

def cpumap_unavailable() -> str:
    """Why ``cpumap_cpu_choice`` is skipped (it is optional in issue 7)."""
    why = "rxlab has no XDP cpumap model to compare with yet"
    missing = [t for t in ("clang", "bpftool") if shutil.which(t) is None]
    if missing:
        why += (f"; and {' and '.join(missing)} (with libbpf headers) are not installed "
                "(apt-get install clang libbpf-dev bpftool)")
    return why


CHECKS: dict[str, Callable[[Ctx], dict]] = {
    "rps_cpu_choice": rps_cpu_choice,
    "rps_flow_stickiness": rps_flow_stickiness,
    "rfs_follows_thread": rfs_follows_thread,
    "flow_limit_shedding": flow_limit_shedding,
    "backlog_drop_accounting": backlog_drop_accounting,
    "cpumap_cpu_choice": None,  # type: ignore[dict-item]
}


def skipped(name: str, reason: str) -> dict:
    return {"name": name, "status": "skipped", "agree": False, "kernel": {}, "model": {},
            "reason": reason}
