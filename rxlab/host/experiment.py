"""Experiments on the real kernel: one traffic run between the lab's namespaces, plus
the BPF hash setter / flow recorders / XDP cpumap redirect and the tc u32 "slow
consumer".

``run_traffic``: start the receiver, wait until it is ready, read softnet_stat and the
veth counters, run the sender, wait 0.2 s, read them again. Every process started here
is waited for or killed (``Procs``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from rxlab.host import bpf
from rxlab.host.lab import Lab
from rxlab.host.netns import in_netns, netns_exec
from rxlab.host.procfs import (
    ksoftirqd_pid,
    proc_stat,
    softnet,
    softnet_delta,
    stat_delta,
    task_ticks,
)
from rxlab.host.signals import check_signals

TRAFFIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "traffic.py")
PORT = 9000
# the receiver reads every 1 ms instead of waiting on its sockets: a wake-up of a process
# on another CPU costs the waking softirq several microseconds in a VM (measured by the
# calibration's wake-up runs), which would be charged to the receive path (``nap``)
RECV_NAP = 0.001


class Procs:
    """Child processes of the current experiment; all killed on the way out."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, ns: str, args: list[str]) -> subprocess.Popen:
        argv = ["ip", "netns", "exec", ns, sys.executable, "-S", TRAFFIC, *args]
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
            with contextlib.suppress(Exception):
                p.wait(timeout=5)
            for fh in (p.stdin, p.stdout, p.stderr):
                with contextlib.suppress(Exception):
                    if fh:
                        fh.close()
        self.procs.clear()


PROCS = Procs()


def _readline(p: subprocess.Popen, what: str, timeout: float = 15.0) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise RuntimeError(f"receiver: no '{what}' within {timeout} s")
    finally:
        sel.close()
    line = p.stdout.readline().strip()
    if line != what and what != "*":
        err = p.stderr.read() if p.poll() is not None else ""
        raise RuntimeError(f"receiver said {line!r} instead of {what!r}: {err.strip()[-300:]}")
    return line


@dataclass
class Run:
    """What one traffic run observed."""

    sent: dict[int, int]
    received: dict[int, int]
    samples: list[dict[int, dict[int, int]]]  # [phase][port][cpu] -> samples
    softnet: dict[int, dict[str, int]]  # deltas over the run
    phases: list[dict[int, dict[str, int]]] = field(default_factory=list)
    dev: dict[str, dict[str, int]] = field(default_factory=dict)  # counter deltas
    udp: dict[str, int] = field(default_factory=dict)  # receiver ns Udp counter deltas
    # port -> the receiver's socket after the traffic: {"drops": rcvbuf drops, "rx_queue": bytes}
    sockets: dict[int, dict[str, int]] = field(default_factory=dict)
    # filled in by the caller: flow recorder counts, side ("tx"/"rx") -> port -> packets
    recorded: dict[str, dict[int, int]] = field(default_factory=dict)
    napi_ticks: int = 0  # threaded-NAPI kthreads' CPU time over the run, clock ticks
    # each CPU's ksoftirqd/N: its CPU time over the same window as cpu_ticks, clock ticks
    ksoftirqd_ticks: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    # /proc/stat deltas per CPU (clock ticks), same window as ``softnet``
    cpu_ticks: dict[int, dict[str, int]] = field(default_factory=dict)
    window: float = 0.0  # seconds between the two counter readings
    send_seconds: float = 0.0  # how long the sender sent
    # the processes' own CPU time (getrusage), seconds: {"utime", "stime"}, and the
    # voluntary context switches "nvcsw" (how often the process slept and was woken)
    recv_rusage: dict[str, float] = field(default_factory=dict)
    send_rusage: dict[str, float] = field(default_factory=dict)
    # the paced sender's bursts: {"sleeps": times it slept, "slept": seconds asleep}
    send_pacing: dict[str, float] = field(default_factory=dict)
    # the receiver namespace's /proc/net/netstat counters that moved (Prefix.Name: delta)
    netstat: dict[str, int] = field(default_factory=dict)

    @property
    def total_sent(self) -> int:
        return sum(self.sent.values())

    def processed_share(self, cpu: int, phase: int | None = None) -> float:
        sn = self.softnet if phase is None else self.phases[phase]
        tot = sum(r["processed"] for r in sn.values())
        return sn.get(cpu, {}).get("processed", 0) / tot if tot else 0.0

    def flow_cpus(self, phase: int = 0) -> dict[int, dict[int, int]]:
        return self.samples[phase]


def run_traffic(lab: Lab, sports: list[int], weights: list[int] | None = None, *,
                duration: float = 1.0, send_cpu: int = 0, recv_cpu: int = 1,
                migrate_at: float | None = None, migrate_to: int = 0,
                settle: float = 0.0, pps: float | None = None, nap: float = 0.0,
                busy_poll: int | None = None) -> Run:
    """``pps``: the sender paces itself to this total rate (default: as fast as it can).
    ``nap``: the receiver sleeps this long between reads instead of waiting on its
    sockets (traffic.py ``--nap``: nothing in the receive path wakes it). ``busy_poll``:
    the receiver reads with blocking recv calls on sockets with SO_BUSY_POLL this many
    us (traffic.py ``--busy-poll``)."""
    check_signals()
    ports = ",".join(map(str, sports))
    rargs = ["recv", "--cpu", str(recv_cpu), "--addr", lab.ip_rx, "--peer", lab.ip_tx,
             "--port", str(PORT), "--sports", ports, "--settle", str(settle),
             "--max-seconds", str(duration + 15)]
    if migrate_at is not None:
        rargs += ["--migrate-at", str(migrate_at), "--migrate-to", str(migrate_to)]
    if nap:
        rargs += ["--nap", str(nap)]
    if busy_poll is not None:
        rargs += ["--busy-poll", str(busy_poll)]
    try:
        recv = PROCS.start(lab.ns_rx, rargs)
        _readline(recv, "ready")
        d0 = lab.dev_stats()
        u0 = lab.udp_stats()
        n0 = lab.netstat()
        s0 = softnet()
        sargs = ["send", "--cpu", str(send_cpu), "--src", lab.ip_tx, "--dst", lab.ip_rx,
                 "--port", str(PORT), "--sports", ports, "--duration", str(duration)]
        if weights:
            sargs += ["--weights", ",".join(map(str, weights))]
        if pps:
            sargs += ["--pps", f"{pps:.1f}"]
        t0 = time.monotonic()
        c0 = proc_stat()
        ks = {c: ksoftirqd_pid(c) for c in c0}
        k0 = {c: task_ticks(pid) for c, pid in ks.items() if pid}
        snd = PROCS.start(lab.ns_tx, sargs)
        phases = []
        if migrate_at is not None:
            _readline(recv, "migrated", timeout=duration + 15)
            s_mid = softnet()
            phases.append(softnet_delta(s0, s_mid))
        out, err = snd.communicate(timeout=duration + 30)
        if snd.returncode != 0:
            raise RuntimeError(f"sender failed: {err.strip()[-300:]}")
        time.sleep(0.2)
        s1 = softnet()
        c1 = proc_stat()
        k1 = {c: task_ticks(ks[c]) for c in k0}
        window = time.monotonic() - t0
        d1 = lab.dev_stats()
        u1 = lab.udp_stats()  # the receiver's sockets are still open
        n1 = lab.netstat()
        secs = time.monotonic() - t0
        if migrate_at is not None:
            phases.append(softnet_delta(s_mid, s1))
        rout, rerr = recv.communicate(input="", timeout=20)
        if recv.returncode != 0:
            raise RuntimeError(f"receiver failed: {rerr.strip()[-300:]}")
        sent = json.loads(out.strip().splitlines()[-1])
        res = json.loads(rout.strip().splitlines()[-1])
    finally:
        PROCS.kill_all()
    samples = [{int(p): {int(c): n for c, n in d.items()} for p, d in ph.items()}
               for ph in res["samples"]]
    dev = {name: {k: d1[name][k] - d0[name][k] for k in d1[name]} for name in d1}
    udp = {k: v - u0["snmp"].get(k, 0) for k, v in u1["snmp"].items()}
    return Run(sent={int(k): v for k, v in sent["sent"].items()},
               received={int(k): v for k, v in res["received"].items()},
               samples=samples, softnet=softnet_delta(s0, s1), phases=phases, dev=dev,
               udp=udp, sockets={p: u1["sockets"].get(p, {"drops": 0, "rx_queue": 0})
                                 for p in sports},
               seconds=secs, cpu_ticks=stat_delta(c0, c1), window=window,
               ksoftirqd_ticks={c: k1[c] - k0[c] for c in k0},
               send_seconds=float(sent.get("seconds", 0.0)),
               recv_rusage=res.get("rusage", {}), send_rusage=sent.get("rusage", {}),
               send_pacing={k: sent.get(k, 0) for k in ("sleeps", "slept")},
               netstat={k: v - n0.get(k, 0) for k, v in n1.items() if v != n0.get(k, 0)})


# --- BPF on the lab's veth ------------------------------------------------------------------

class Bpf:
    """Maps and filters of one experiment; ``close`` drops our references."""

    def __init__(self, lab: Lab):
        self.lab = lab
        self.fds: list[int] = []
        self.recorders: dict[str, int] = {}
        self.clsact: set[str] = set()
        self.xdp = False
        self.cpumap_stats = -1

    def _clsact(self, ns: str, dev: str) -> None:
        if ns not in self.clsact:
            self.lab.ensure_clsact(ns, dev)
            self.clsact.add(ns)

    def set_hashes(self, hashes: dict[int, int]) -> None:
        """tc egress on the sender veth: skb->hash := hashes[UDP source port]."""
        mfd = bpf.map_create(4, 4, max(16, len(hashes)), b"rxkc_hashes")
        self.fds.append(mfd)
        for port, h in hashes.items():
            bpf.map_update(mfd, bpf.port_key(port), int(h & 0xFFFFFFFF).to_bytes(4, "little"))
        pfd = bpf.prog_load(bpf.hash_setter_insns(mfd), b"rxkc_set_hash")
        try:
            self._clsact(self.lab.ns_tx, self.lab.dev_tx)
            in_netns(self.lab.ns_tx, bpf.tc_attach, self.lab.dev_tx, "egress", pfd,
                     "rxkc_set_hash", sysfs=False)
        finally:
            os.close(pfd)

    def record(self, prio: int | None = None, side: str = "rx") -> None:
        """A flow recorder: per (source port, CPU) the last skb->hash and packets.

        ``side="rx"``: tc ingress on the receiver veth, on the CPU that processes the
        packet (after RPS, the backlog and a cpumap hop); ``prio`` above the u32
        slowdown's (1..800) puts it after those filters. ``side="tx"``: tc egress on the
        sender veth, just before ``veth_xmit``: what enters the receive path (``prio``
        2 by default: after the hash setter)."""
        if prio is None:
            prio = 1 if side == "rx" else 2
        lab = self.lab
        ns, dev, hook = ((lab.ns_rx, lab.dev_rx, "ingress") if side == "rx" else
                         (lab.ns_tx, lab.dev_tx, "egress"))
        mfd = bpf.map_create(4, bpf.RECORD_SIZE, 1024, b"rxkc_flows_" + side.encode())
        self.fds.append(mfd)
        self.recorders[side] = mfd
        pfd = bpf.prog_load(bpf.flow_recorder_insns(mfd), b"rxkc_record_" + side.encode())
        try:
            self._clsact(ns, dev)
            in_netns(ns, bpf.tc_attach, dev, hook, pfd, "rxkc_record_" + side, prio,
                     sysfs=False)
        finally:
            os.close(pfd)

    def records(self, side: str = "rx") -> dict[int, dict]:
        """port -> {"hashes": hashes seen, "hash_changes": n, "cpus": {cpu: packets}}."""
        out: dict[int, dict] = {}
        for k, v in bpf.map_items(self.recorders[side], 4, bpf.RECORD_SIZE):
            port, cpu, h, changes, pkts = bpf.parse_record(k, v)
            e = out.setdefault(port, {"hashes": set(), "hash_changes": 0, "cpus": {}})
            e["hashes"].add(h)
            e["hash_changes"] += changes
            e["cpus"][cpu] = e["cpus"].get(cpu, 0) + pkts
        return out

    def packets(self, side: str = "rx") -> dict[int, int]:
        """port -> packets the recorder on ``side`` saw."""
        return {p: sum(e["cpus"].values()) for p, e in self.records(side).items()}

    def cpumap_redirect(self, redirect: dict[int, int], cpus: list[int],
                        qsize: int = 192) -> None:
        """Native XDP on the receiver veth: UDP source port -> ``redirect[port]`` through
        a cpumap with an entry (``qsize``) for each of ``cpus``; other packets pass.
        Counts cpumap enqueue and kthread events through raw tracepoints."""
        ports = bpf.map_create(4, 4, max(16, len(redirect)), b"rxkc_xdp_ports")
        self.fds.append(ports)
        for port, cpu in redirect.items():
            bpf.map_update(ports, bpf.port_key(port), int(cpu).to_bytes(4, "little"))
        cmap = bpf.map_create(4, 4, max(cpus) + 1, b"rxkc_cpumap", bpf.BPF_MAP_TYPE_CPUMAP)
        self.fds.append(cmap)
        for cpu in cpus:  # each entry starts a kthread cpumap/<cpu>/map:<id>
            bpf.map_update(cmap, int(cpu).to_bytes(4, "little"), int(qsize).to_bytes(4, "little"))
        self.cpumap_stats = bpf.map_create(4, bpf.CPUMAP_STATS_SIZE, bpf.CPUMAP_STATS_SLOTS,
                                           b"rxkc_cpumap_st", bpf.BPF_MAP_TYPE_ARRAY)
        self.fds.append(self.cpumap_stats)
        for tp, kthread in (("xdp_cpumap_enqueue", False), ("xdp_cpumap_kthread", True)):
            pfd = bpf.prog_load(bpf.cpumap_counter_insns(self.cpumap_stats, kthread),
                                b"rxkc_" + tp[4:].encode(), bpf.BPF_PROG_TYPE_RAW_TRACEPOINT)
            try:
                self.fds.append(bpf.raw_tracepoint_open(tp, pfd))  # closing detaches
            finally:
                os.close(pfd)
        pfd = bpf.prog_load(bpf.xdp_cpumap_insns(ports, cmap), b"rxkc_xdp_cpumap",
                            bpf.BPF_PROG_TYPE_XDP)
        try:
            in_netns(self.lab.ns_rx, bpf.xdp_attach, self.lab.dev_rx, pfd, sysfs=False)
            self.xdp = True
        finally:
            os.close(pfd)

    def cpumap_counts(self) -> dict:
        """{"enqueue": {dest cpu: {processed, drops}}, "kthread": {cpu: {...}}}."""
        return bpf.parse_cpumap_stats(
            bpf.map_items(self.cpumap_stats, 4, bpf.CPUMAP_STATS_SIZE))

    def close(self) -> None:
        if self.xdp:  # the namespace's deletion would remove it too
            self.xdp = False
            with contextlib.suppress(OSError, RuntimeError):
                in_netns(self.lab.ns_rx, bpf.xdp_attach, self.lab.dev_rx, -1, sysfs=False)
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


class SoftirqTimer:
    """NET_RX softirq time per CPU, in ns, from the softirq_entry/exit tracepoints:
    exact where /proc/stat samples one tick (4 ms at HZ 250). Global, not per
    namespace: background NET_RX work of the host is included (fits take it as an
    intercept). ``close`` detaches."""

    def __init__(self):
        self.fds: list[int] = []
        self.slots = bpf.map_create(4, bpf.SOFTIRQ_SLOT_SIZE, bpf.SOFTIRQ_SLOTS,
                                    b"rxcal_softirq", bpf.BPF_MAP_TYPE_ARRAY)
        self.fds.append(self.slots)
        try:
            for tp, entry in (("softirq_entry", True), ("softirq_exit", False)):
                pfd = bpf.prog_load(bpf.softirq_timer_insns(self.slots, entry),
                                    b"rxcal_" + tp[8:].encode(),
                                    bpf.BPF_PROG_TYPE_RAW_TRACEPOINT)
                try:
                    self.fds.append(bpf.raw_tracepoint_open(tp, pfd))
                finally:
                    os.close(pfd)
        except BaseException:
            self.close()
            raise

    def read(self) -> dict[int, dict[str, int]]:
        return bpf.parse_softirq_slots(
            bpf.map_items(self.slots, 4, bpf.SOFTIRQ_SLOT_SIZE))

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


class HandoffTimer:
    """The RPS hand-off time of each packet, from the raw tracepoints ``netif_rx`` (on
    the CPU that enqueues it to another CPU's backlog) and ``netif_receive_skb`` (on
    the CPU that starts processing it): the sending CPU's softirq that sends the IPI,
    the IPI, the target's interrupt and softirq up to ``process_backlog``. Global, not
    per namespace: packets processed where they were enqueued are not counted.
    ``read`` gives counts per ``bpf.HANDOFF_SHIFT`` bucket; ``close`` detaches."""

    def __init__(self):
        self.fds: list[int] = []
        try:
            self.stamps = bpf.map_create(8, 16, bpf.HANDOFF_STAMPS, b"rxcal_stamps")
            self.fds.append(self.stamps)
            self.hist = bpf.map_create(4, 8, bpf.HANDOFF_BUCKETS, b"rxcal_handoff",
                                       bpf.BPF_MAP_TYPE_ARRAY)
            self.fds.append(self.hist)
            for tp, insns in (("netif_rx", bpf.handoff_stamp_insns(self.stamps)),
                              ("netif_receive_skb",
                               bpf.handoff_hist_insns(self.stamps, self.hist))):
                pfd = bpf.prog_load(insns, b"rxcal_" + tp[:9].encode(),
                                    bpf.BPF_PROG_TYPE_RAW_TRACEPOINT)
                try:
                    self.fds.append(bpf.raw_tracepoint_open(tp, pfd))
                finally:
                    os.close(pfd)
        except BaseException:
            self.close()
            raise

    def read(self) -> list[int]:
        return bpf.parse_handoff_hist(bpf.map_items(self.hist, 4, 8))

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def handoff_quantiles(before: list[int], after: list[int]) -> dict:
    """Quantiles (ns, bucket midpoints) of the hand-offs counted between two reads."""
    counts = [a - b for a, b in zip(after, before, strict=True)]
    n = sum(counts)
    out = {"n": n}
    width = 1 << bpf.HANDOFF_SHIFT
    for name, q in (("min", 0.0), ("p10", 0.1), ("median", 0.5), ("p90", 0.9)):
        if not n:
            out[name] = None
            continue
        target, acc = max(1, int(q * n + 0.5)) if q else 1, 0
        for i, c in enumerate(counts):
            acc += c
            if acc >= target:
                out[name] = (i + 0.5) * width
                break
    return out


def slow_consumer(n_filters: int = 800, lab: Lab | None = None) -> None:
    """800 non-matching u32 filters at tc ingress of the receiver veth: every packet
    walks them on the CPU that processes it (tc ingress runs in
    ``__netif_receive_skb_core()``, net/core/dev.c, after RPS). The clsact qdisc
    must be there (``Lab.add_clsact``)."""
    lab = lab or Lab()
    with tempfile.NamedTemporaryFile("w", suffix=".tc", delete=False) as fh:
        for i in range(1, n_filters + 1):
            fh.write(f"filter add dev {lab.dev_rx} ingress prio {i} protocol ip u32 "
                     f"match ip dport {10000 + i} 0xffff flowid 1:1\n")
        path = fh.name
    try:
        netns_exec(lab.ns_rx, ["tc", "-b", path], timeout=60)
    finally:
        os.unlink(path)
