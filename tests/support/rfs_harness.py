"""Small RFS / aRFS scenarios and a ``Harness`` that builds a model and calls the
simulator's jitted mechanisms on hand-set state, shared by the RFS, aRFS, collision and
TCP tests (the kernel's own rules they are checked against: ``rfs_reference``).

Imported by the test modules (``from rfs_harness import ...``); pytest puts ``tests/``
on ``sys.path`` (rootdir conftest, prepend import mode).
"""

from __future__ import annotations

import copy

import numpy as np

from support.rfs_reference import (
    RPS_NO_CPU,
    RPS_NO_FILTER,
    U32,
    RefKernel,
    ref_rfs_slot,
    s32,
)


# ----------------------------------------------------------- scenario builders -------
def merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def tcp_group(name="tcp", flows=8, pps=10_000, **extra) -> dict:
    g = {
        "name": name, "flows": flows, "proto": "tcp",
        "src": {"cidr": "10.0.0.0/16"}, "dst": {"addr": "10.1.0.1"},
        "sport": {"range": [1024, 65535]}, "dport": {"value": 5201},
        "rate": {"pps": pps}, "arrivals": "poisson", "size": 1514,
    }
    g.update(extra)
    return g


def rfs_dict(*, cpus=4, queues=None, version="6.19", entries=4096, flow_cnt=1024,
             arfs=None, groups=None, apps=None, duration=0.02, **sections) -> dict:
    """A small RFS host: one rx queue per CPU with IRQs 1:1, one consumer thread per CPU."""
    queues = queues or cpus
    d = {
        "name": "rfs-test", "seed": 7, "duration": duration, "drain": 0.01,
        "host": {"cpus": cpus, "kernel": version},
        "nic": {"queues": queues, "irq_affinity": [q % cpus for q in range(queues)],
                "ring_size": 1024, "link_gbps": 100},
        "kernel": {"rps_sock_flow_entries": entries, "rps_flow_cnt": flow_cnt},
        "traffic": {"groups": groups or [tcp_group()]},
        "apps": apps if apps is not None else [
            {"name": "app", "cpus": f"0-{cpus - 1}", "spread": "round_robin",
             "cost": {"user_ns": 0}}],
    }
    if arfs:
        d["nic"]["arfs"] = arfs if isinstance(arfs, dict) else {"model": arfs}
    return merge(d, sections)


class Harness:
    """A built model plus its ``Sim`` for calling jitted mechanisms on hand-set state."""

    def __init__(self, d: dict):
        from rxlab.build import build
        from rxlab.kernel.sim import sim_of
        from rxlab.scenario import scenario_from_dict

        self.d = d
        self.m = build(scenario_from_dict(d))
        m = self.m
        self.s = sim_of(m)
        self.p, self.rf, self.sd, self.ar = m.params, m.rf, m.sd, m.ar
        self._init = {name: arr.copy() for name, arr in self._arrays()}

    def _arrays(self):
        for grp in (self.m.nic, self.m.sd, self.m.so, self.m.st, self.m.rf, self.m.ar,
                    self.m.ev):
            for name in grp._fields:
                arr = getattr(grp, name)
                if isinstance(arr, np.ndarray):
                    yield f"{type(grp).__name__}.{name}", arr

    def reset(self):
        """Back to the state right after build (tables empty, counters zero)."""
        for name, arr in self._arrays():
            arr[...] = self._init[name]
        return self

    @property
    def ncpu(self):
        return self.p.ncpu

    def log(self, q=0):
        return int(self.rf.dev_log[q])

    def record(self, h, cpu):
        """What sock_rps_record_flow stores (include/net/rps.h), written by hand."""
        mask = self.p.rps_cpu_mask
        self.rf.sock_flow[h & self.p.sock_flow_mask] = ((h & ~mask) & U32) | cpu

    def get_rps_cpu(self, rxq, h, f=0, t=0):
        from support.compiled_calls import get_rps_cpu

        cpu, rq, rs, _ = get_rps_cpu(self.s, int(rxq), int(h), int(f), int(t))
        self.rflow = (int(rq), int(rs))  # what the next enqueue records its tail in
        return int(cpu), (None if rq < 0 else self.rflow)

    def enqueue(self, this_cpu, cpu, f=0, h=1, t=0):
        """enqueue_to_backlog, then forget the packet (keeps the FIFO and the NAPI lists
        from filling up; input_queue_tail and the rflow's last_qtail stay advanced)."""
        from support.compiled_calls import enqueue_to_backlog

        rq, rs = getattr(self, "rflow", (-1, -1))
        sd = self.sd
        tail = int(sd.cpu["bl_tail"][cpu])
        enqueue_to_backlog(self.s, int(this_cpu), int(cpu), int(h), int(f), 0, 0, 64, int(t),
                           rq, rs)
        ok = int(sd.cpu["bl_tail"][cpu]) == tail + 1  # queued, not dropped
        sd.cpu["bl_head"][cpu] = sd.cpu["bl_proc"][cpu] = sd.cpu["bl_tail"][cpu]
        sd.cpu["bl_sched"][:] = 0
        sd.cpu["ipi_n"][:] = 0
        sd.cpu["pl_n"][:] = 0
        sd.cpu["softirq_pending"][:] = 0
        return ok

    def ent(self, q, slot):
        rf = self.rf
        return [int(rf.dev["cpu"][q, slot]), int(rf.dev["filter"][q, slot]),
                int(rf.dev["last_qtail"][q, slot]), int(rf.dev["hash"][q, slot])]


def rfs_tables_of(h: Harness, ref: RefKernel, with_hash: bool = True):
    """(sim, ref) per-queue tables as {(q, slot): [cpu, filter, last_qtail, hash]} for
    every slot not in its initial state in either (hash left out unless ``with_hash``)."""
    rf = h.rf
    k = 4 if with_hash else 3
    changed = ((rf.dev["cpu"] != RPS_NO_CPU) | (rf.dev["filter"] != RPS_NO_FILTER)
               | (rf.dev["last_qtail"] != 0) | (rf.dev["hash"] != 0))
    qs, slots = np.nonzero(changed)
    sim = {(int(q), int(sl)): h.ent(q, sl)[:k] for q, sl in zip(qs, slots, strict=True)}
    want = {}
    for q in range(len(ref.tab)):
        for slot, e in ref.tab[q].items():
            if e != [RPS_NO_CPU, RPS_NO_FILTER, 0, 0]:
                want[(q, slot)] = list(e)[:k]
    return sim, want


def find_colliding(h0: int, log: int, hash32: bool, n: int = 1, avoid=(),
                   sock_mask: int | None = 4095) -> list[int]:
    """``n`` distinct non-zero hashes != h0 with the same ice bucket (hash & 1023) and the
    same flow_id in a table of 2**log entries. With ``sock_mask`` each also sits in a
    socket-table slot used by no other given hash (at most 3 such partners exist for
    4096 entries: the slot then only differs in hash bits 10-11)."""
    fid = ref_rfs_slot(h0, log, hash32)
    taken = {h0, *avoid}
    used = {x & sock_mask for x in taken} if sock_mask is not None else set()
    out = []
    for k in range(1, 1 << 22):  # every hash with h0's low 10 bits
        h = (h0 + (k << 10)) & U32
        if not h or h in taken or ref_rfs_slot(h, log, hash32) != fid:
            continue
        if sock_mask is not None:
            if (h & sock_mask) in used:
                continue
            used.add(h & sock_mask)
        out.append(h)
        taken.add(h)
        if len(out) == n:
            return out
    raise ValueError(f"no {n} partners for {h0:#x} (avoid {[hex(a) for a in avoid]})")


def run_with_snapshots(m, times_s):
    """Run a built model like ``rxlab.simulate.run_model`` and take copies of the global
    counters, per-CPU ``processed`` and RFS/aRFS counters when the traffic passes each
    time in ``times_s`` (seconds). Returns a list of snapshots (dicts), one per time,
    plus one at the end."""
    from rxlab.kernel.rx_loop import feed, feed_end, shape
    from rxlab.kernel.sim import sim_of
    from rxlab.traffic.stream import PacketStream

    sc = m.scenario
    stream = PacketStream(sc.traffic, m.flows, sc.seed, sc.duration)
    link = int(round(8000.0 / sc.nic.link_gbps))
    svc_ns = int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0
    sim = sim_of(m)
    marks = [int(round(x * 1e9)) for x in sorted(times_s)]
    snaps = []

    def snap():
        snaps.append({
            "cnt": m.st.cnt.copy(), "processed": m.sd.cpu["processed"].copy(),
            "rfs": m.rf.cnt.copy(), "arfs": m.ar.cnt.copy(),
            "thread_cpu": m.so.thread["thread_cpu"].copy(),
            "delivered": m.so.flow["flow_delivered"].copy(),
        })

    for chunk in stream.chunks(1 << 16):
        n = len(chunk)
        t_wire = np.empty(n, np.int64)
        t_nic = np.empty(n, np.int64)
        overrun = np.empty(n, np.bool_)
        shape(chunk.t_ns, chunk.size, link, svc_ns, sc.nic.nic_fifo, m.port_state, t_wire,
              t_nic, overrun)
        lo = 0
        while marks and lo < n:
            cut = int(np.searchsorted(t_nic, marks[0]))
            if cut >= n:
                break
            if cut > lo:
                feed(sim, t_wire[lo:cut].copy(), t_nic[lo:cut].copy(),
                     chunk.flow[lo:cut].copy(), chunk.size[lo:cut].copy(),
                     overrun[lo:cut].copy())
            lo = cut
            snap()
            marks.pop(0)
        if lo < n:
            feed(sim, t_wire[lo:].copy(), t_nic[lo:].copy(), chunk.flow[lo:].copy(),
                 chunk.size[lo:].copy(), overrun[lo:].copy())
    for _ in marks:
        snap()
    end = int(round((sc.duration + sc.drain) * 1e9))
    feed_end(sim, end)
    snap()
    return snaps


def harness_service(h: Harness, t: int) -> None:
    """The service task / work item runs: program queued filters (EV_ARFS_SVC)."""
    from rxlab.engine.core import clear
    from support.compiled_calls import arfs_program_pending

    arfs_program_pending(h.s, int(t))
    h.ar.glob[0]["svc_pending"] = 0
    clear(h.m.ev)  # drop the calendar events these direct calls scheduled


def harness_scan(h: Harness, t: int) -> None:
    """The periodic expiry scan (ice service timer / mlx5 arfs_may_expire_flow)."""
    from support.compiled_calls import arfs_expire_scan

    arfs_expire_scan(h.s, int(t))


# ------------------------------------------------------- differential driving -------
def sim_entries(h: Harness) -> dict:
    """The driver's filter list per bucket, in chain order: {bucket: [(flow, flow_id,
    fltr_id, queue, programmed)]}."""
    from rxlab.kernel.state import ARFS_ACTIVE

    ar = h.ar
    out = {}
    for b in np.nonzero(ar.bucket >= 0)[0]:
        e = int(ar.bucket[b])
        chain = []
        while e >= 0:
            r = ar.entry[e]
            chain.append((int(r["flow"]), int(r["flow_id"]), int(r["fltr_id"]), int(r["q"]),
                          bool(r["state"] == ARFS_ACTIVE)))
            e = int(r["next"])
        out[int(b)] = chain
    return out


def ref_entries(ref: RefKernel) -> dict:
    out = {}
    for e in ref.entries:
        out.setdefault(ref.bucket_of[id(e)], []).append(e.key())
    return out


def set_positions(h: Harness, ref: RefKernel, base: list[int]) -> None:
    """Start every CPU's head and tail at ``base[cpu]`` (u32) in both."""
    for c, v in enumerate(base):
        h.sd.cpu["input_queue_head"][c] = h.sd.cpu["input_queue_tail"][c] = v
        ref.head[c] = ref.tail[c] = v


def apply_op(h: Harness, ref: RefKernel, op: tuple, hashes: list[int], t: int):
    """Apply one operation to the simulator and the reference; returns what each saw."""
    kind = op[0]
    if kind == "pkt":  # a packet of flow f arrives on rx queue q
        _, f, q = op
        got = h.get_rps_cpu(q, hashes[f], f, t)
        want = ref.get_rps_cpu(q, hashes[f], f, t)
        if got[0] >= 0:
            h.enqueue(int(h.p.queue[q]["irq_cpu"]), got[0], f, hashes[f], t)
        if want[0] >= 0:
            ref.enqueue(want[0], want[1])
        return got, want
    if kind == "rec":  # the consumer of flow f reads on CPU c
        _, f, c = op
        h.record(hashes[f], c)
        ref.record(hashes[f], c)
    elif kind == "deq":  # CPU c's process_backlog delivers n of its queued packets
        _, c, n = op
        n = min(n, s32(ref.tail[c], ref.head[c]))
        h.sd.cpu["input_queue_head"][c] = (int(h.sd.cpu["input_queue_head"][c]) + n) & U32
        ref.dequeue(c, n)
    elif kind == "svc":
        harness_service(h, t)
        ref.service(t)
    elif kind == "scan":
        harness_scan(h, t)
        ref.expire_scan(t)
    return None, None


def e2e_dict(entries=4096, connected=True, migrate=True, pps=20_000, duration=0.06,
             user_ns=500, flows=16, version="6.19", arfs=None, flow_cnt=1024, **sections):
    """4 CPUs and queues, IRQs 1:1, four apps with one thread each (app i on CPU i reads
    group gi of ``flows`` TCP flows); apps 0 and 1 move at 30 ms to CPUs 2 and 3."""
    groups = [tcp_group(f"g{i}", flows=flows, pps=pps, src={"cidr": f"10.{i}.0.0/16"})
              for i in range(4)]
    apps = []
    for i in range(4):
        a = {"name": f"a{i}", "cpus": i, "groups": [f"g{i}"], "connected": connected,
             "cost": {"user_ns": user_ns}}
        if migrate and i in (0, 1):
            a["migrate"] = [{"at": 0.03, "cpu": i + 2}]
        apps.append(a)
    return rfs_dict(cpus=4, entries=entries, groups=groups, apps=apps, duration=duration,
                    version=version, arfs=arfs, flow_cnt=flow_cnt, **sections)
