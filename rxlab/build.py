"""Compile a validated Scenario into the arrays the jitted loop runs on.

All per-flow work happens here, vectorised, once: the RSS hash and queue of every flow,
its skb hash (hardware L4 hash or the kernel's software SipHash), its socket. Values the
kernel rounds are rounded here and reported in ``Model.config``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rxlab import drivers
from rxlab.engine.arena import relocate
from rxlab.engine.core import PRIO_TIMER, PRIO_WAKE, Calendar, new_calendar, schedule
from rxlab.engine.rng import JITTER_EXP, JITTER_LOGNORMAL, JITTER_NONE
from rxlab.errors import UsageError
from rxlab.kernel import constants as K
from rxlab.kernel.accounting import new_stats
from rxlab.kernel.events import EV_ARFS_TIMER, EV_MIGRATE
from rxlab.kernel.flow_hash import skb_get_hash_flows
from rxlab.kernel.hashfn import ilog2, roundup_pow_of_two
from rxlab.kernel.rfs import new_rfs_state
from rxlab.kernel.sched import SCHED_IDLE
from rxlab.kernel.stages import JITTERED, STAGES
from rxlab.kernel.state import (
    APP_THREAD,
    ARFS_ICE_HASH_MATCH,
    ARFS_ICE_TUPLE_MATCH,
    ARFS_MODELS,
    ARFS_OFF,
    CPU_PARAMS,
    CPUMAP_PARAMS,
    FLOW,
    FLOW_SEQ,
    NAPI_KTHREAD,
    POLL_PAUSE,
    QUEUE_PARAMS,
    REFILL_AFTER_LOOP,
    REFILL_IN_LOOP,
    REFILL_PER_PACKET,
    RX_RING,
    SKB,
    SOCK,
    SOFTNET_DATA,
    ArfsState,
    CpumapState,
    NicState,
    Params,
    RfsState,
    SockState,
    SoftnetData,
    Stats,
)
from rxlab.kernel.versions import KernelBehaviour, behaviour
from rxlab.memory_budget import check as check_memory
from rxlab.nic.arfs import new_arfs_state
from rxlab.nic.toeplitz import MS_RSS_KEY, parse_key, rss_hash_flows, v4_mapped
from rxlab.profiles import stage_costs
from rxlab.reuseport import ehash_secrets, lookup_hash, reuseport_pick
from rxlab.scenario import Scenario, hex_mask_to_cpus
from rxlab.scenario_checks import table as table_of
from rxlab.traffic.flows import FlowTable, build_flows
from rxlab.traffic.match import match_mask
from rxlab.xdp.cpumap import new_cpumap_state
from rxlab.xdp.rules import compile_xdp, xdp_config

I64 = np.int64


@dataclass
class Model:
    scenario: Scenario
    params: Params
    nic: NicState
    sd: SoftnetData
    so: SockState
    st: Stats
    ev: Calendar
    rf: RfsState
    ar: ArfsState
    cm: CpumapState
    flows: FlowTable
    kb: KernelBehaviour
    config: dict = field(default_factory=dict)  # effective (rounded) settings
    capture: object = None  # rxlab.capture.pcap.Capture when traffic replays a pcap
    threads: list = field(default_factory=list)  # (app name, cpu) per thread
    port_state: np.ndarray = field(default_factory=lambda: np.zeros(2, I64))
    notices: list = field(default_factory=list)  # what the run changed, for the user


def traffic_window_ns(duration: float, interval_ns: int, n_intervals: int) -> int:
    """The span [0, W) the run's CPU shares cover: the whole series intervals inside the
    traffic's duration; a run shorter than one interval (a short capture) is measured
    over its own span, not diluted by the idle rest of the interval."""
    if duration * 1e9 < interval_ns:
        return max(1, int(round(duration * 1e9)))
    return max(1, min(n_intervals, int(round(duration * 1e9 / interval_ns)))) * interval_ns


def driver_poll_params(pre: drivers.Preset, ring: int) -> dict:
    """The preset's poll and refill rules as the loop reads them (``Params.poll_*``,
    ``refill_*``)."""
    r = pre.refill
    if r.rule == "per-packet":
        where, batch = REFILL_PER_PACKET, 1
    elif r.rule == "poll-end":
        where, batch = REFILL_AFTER_LOOP, 1
    else:  # threshold / every: a count, or a fraction of the ring (i40e: count / 2)
        where = REFILL_AFTER_LOOP if r.where == "after-loop" else REFILL_IN_LOOP
        batch = max(1, int(r.batch * ring) if r.batch < 1 else int(r.batch))
    return {"poll_clean": pre.poll.value == "clean-until-unwritten", "refill_where": where,
            "refill_batch": batch, "refill_keep": min(r.keep_empty, ring - 1),
            "refill_align": r.tail_align if ring >= r.tail_align else 1}


def _indirection(spec, size: int, queues: int, where: str) -> np.ndarray:
    """The table of a spec the schema accepted (rxlab.scenario_checks.table)."""
    return table_of(spec, size, queues, where)


def _addr_rows(fl: FlowTable) -> tuple[np.ndarray, np.ndarray]:
    src = np.where(fl.is_v6[:, None], fl.src_v6, v4_mapped(fl.src_v4))
    dst = np.where(fl.is_v6[:, None], fl.dst_v6, v4_mapped(fl.dst_v4))
    return src, dst


def _flow_type(proto: np.ndarray, is_v6: np.ndarray) -> np.ndarray:
    names = np.array(["tcp4", "udp4", "tcp6", "udp6"])
    return names[(proto == 17).astype(int) + 2 * is_v6.astype(int)]


def flow_steering(sc: Scenario, fl: FlowTable) -> dict[str, np.ndarray]:
    """RSS hash, rx queue and skb hash of every flow (vectorised)."""
    nic, n = sc.nic, len(fl)
    key = parse_key(nic.rss.key) if nic.rss.key else MS_RSS_KEY
    fields = {t: nic.rss.flow_hash.get(t, "sdfn") for t in ("tcp4", "udp4", "tcp6", "udp6")}
    src, dst = _addr_rows(fl)
    try:
        rss = rss_hash_flows(key, src, dst, fl.sport, fl.dport, fl.is_v6, fields,
                             nic.rss.input_xfrm, proto=fl.proto)
    except ValueError as err:
        raise UsageError(f"nic.rss: {err}") from None
    size = nic.rss.table_size
    table = _indirection(nic.rss.indirection, size, nic.queues, "nic.rss.indirection")
    rxq = table[rss & np.uint32(size - 1)].astype(I64)
    ctx_tables = {
        c.id: _indirection(c.indirection, size, nic.queues, f"nic.rss.contexts[{i}]")
        for i, c in enumerate(nic.rss.contexts)
    }
    # n-tuple rules, first match wins (ethtool rule order = location order)
    matched = np.zeros(n, bool)
    for r, rule in enumerate(nic.ntuple):
        m = ~matched & match_mask(rule.match, fl, f"nic.ntuple[{r}]")
        if rule.queue is not None:
            rxq[m] = rule.queue
        else:
            rxq[m] = ctx_tables[rule.context][rss[m] & np.uint32(size - 1)] + rule.ring_cookie
        matched |= m
    if not nic.rxhash and nic.preset().name == "mvpp2":
        rxq[:] = 0  # mvpp2 ties RSS distribution to NETIF_F_RXHASH (seed 001)
    # skb_get_hash(): a hardware L4 hash is kept; an L3 hash or no hash is replaced by
    # the software flow hash (include/linux/skbuff.h, net/core/flow_dissector.c)
    sw, _l4 = skb_get_hash_flows(sc.kernel.hashrnd, src, dst, fl.sport, fl.dport,
                                  fl.proto, fl.is_v6)
    types = _flow_type(fl.proto, fl.is_v6)
    hw_l4 = np.array([set("fn") <= set(fields[t]) for t in types], bool) & nic.rxhash
    skb_hash = np.where(hw_l4, rss, sw).astype(I64)
    return {"rss_hash": rss, "rxq": rxq, "skb_hash": skb_hash, "hw_l4": hw_l4,
            "table": table, "sw_hash": sw}


def _rps_maps(sc: Scenario) -> tuple[np.ndarray, np.ndarray, list[str]]:
    nq, ncpu = sc.nic.queues, sc.host.cpus
    rps = sc.kernel.rps_cpus
    masks = [""] * nq
    if isinstance(rps, str):
        masks = [rps] * nq
    elif isinstance(rps, dict):
        for q, m in rps.items():
            masks[q] = m
    rps_map = np.zeros((nq, ncpu), I64)
    rps_len = np.zeros(nq, I64)
    for q, m in enumerate(masks):
        cpus = hex_mask_to_cpus(m) if m else []
        rps_map[q, : len(cpus)] = cpus
        rps_len[q] = len(cpus)
    return rps_map, rps_len, masks


def _rfs_tables(sc: Scenario, kb: KernelBehaviour) -> tuple[int, np.ndarray]:
    """(rounded rps_sock_flow_entries, log2 of each queue's rps_flow_cnt or 0)."""
    k, nq = sc.kernel, sc.nic.queues
    n = k.rps_sock_flow_entries
    entries = roundup_pow_of_two(n) if n else 0
    cnts = [0] * nq
    if isinstance(k.rps_flow_cnt, dict):
        for q, c in k.rps_flow_cnt.items():
            cnts[q] = c
    else:
        cnts = [k.rps_flow_cnt] * nq
    logs = np.zeros(nq, I64)
    for q, c in enumerate(cnts):
        if c:
            logs[q] = ilog2(roundup_pow_of_two(c))
    return entries, logs


def napi_thread_cpus(sc: Scenario, irq: list[int]) -> np.ndarray:
    """Each queue's napi/DEV-ID kthread CPU (threaded NAPI), or -1: softirq polls it."""
    if not sc.nic.threaded:
        return np.full(len(irq), -1, np.int64)
    return np.array(sc.nic.napi_thread_affinity or irq, np.int64)


def _migration(sc: Scenario, nth: int, ncpu: int, app_of_thread: list[int]):
    every = np.zeros(nth, I64)
    mset = np.zeros((nth, ncpu), I64)
    mset_n = np.zeros(nth, I64)
    moves = [sc.apps[a].migrate if isinstance(sc.apps[a].migrate, list) else []
             for a in app_of_thread]
    kmax = max([1] + [len(m) for m in moves])
    mt = np.zeros((nth, kmax), I64)
    mc = np.zeros((nth, kmax), I64)
    mn = np.zeros(nth, I64)
    for th, a in enumerate(app_of_thread):
        mg = sc.apps[a].migrate
        if isinstance(mg, list):
            for k, mv in enumerate(sorted(mg, key=lambda m: m.at)):
                mt[th, k] = int(round(mv.at * 1e9))
                mc[th, k] = mv.cpu
            mn[th] = len(mg)
        elif mg is not None:
            from rxlab.scenario import _cpu_list

            cpus = _cpu_list(mg.cpus)
            every[th] = int(round(mg.every_s * 1e9))
            mset[th, : len(cpus)] = cpus
            mset_n[th] = len(cpus)
    return every, mset, mset_n, mt, mc, mn



def fair_class_params(kb, ncpu: int, jiffy_ns: int) -> dict:
    """The fair class's tunables as kernel/sched/fair.c sets them at boot: each default
    times 1 + ilog2(min(ncpus, 8)) (``update_sysctl``, SCHED_TUNABLESCALING_LOG)."""
    factor = 1 + ilog2(min(ncpu, K.SCHED_SCALE_MAX_CPUS))
    base = K.SCHED_BASE_SLICE_NS if kb.sched_slice_070 else K.SCHED_BASE_SLICE_NS_V66
    slice_ns = factor * (base if kb.sched_eevdf else K.SCHED_LATENCY_NS)
    return dict(sched_eevdf=kb.sched_eevdf, sched_slice_ns=slice_ns,
                sched_min_gran_ns=factor * K.SCHED_MIN_GRANULARITY_NS,
                sched_wakeup_gran_ns=factor * K.SCHED_WAKEUP_GRANULARITY_NS,
                sched_lag_limit_ns=max(2 * slice_ns, jiffy_ns))

def build(sc: Scenario, capture=None, xdp_program=None, max_memory=None) -> Model:
    """Compile a scenario; ``capture`` is an already opened pcap for ``traffic.pcap``;
    ``xdp_program`` a vectorised per-flow XDP program (``rxlab.xdp.rules``).

    The memory the scenario implies is checked against ``max_memory`` (bytes or a size
    such as '8GiB'; default: ``rxlab.memory_budget.default_limit``) before anything is
    allocated; over it, a one-line UsageError names the field."""
    kb = behaviour(sc.host.kernel)
    ncpu, nq = sc.host.cpus, sc.nic.queues
    tl = sc.kernel.flow_limit_table_len
    sock_entries, dev_logs = _rfs_tables(sc, kb)
    est = check_memory(sc, max_memory, capture)
    if sc.traffic.pcap is not None:
        if capture is None:
            from rxlab.capture.pcap import open_capture

            pc = sc.traffic.pcap
            capture = open_capture(pc.file, speedup=pc.speedup,
                                   allow_truncated=pc.allow_truncated)
        fl = capture.flows
    else:
        fl = build_flows(sc.traffic, sc.seed)
    steer = flow_steering(sc, fl)

    # --- kernel knobs, rounded / validated the kernel's way -------------------------
    fl_cpus = hex_mask_to_cpus(sc.kernel.flow_limit_cpu_bitmap)
    hist = K.FLOW_LIMIT_HISTORY_2013 if sc.kernel.flow_limit_variant == "2013" else (
        K.FLOW_LIMIT_HISTORY)
    jiffy_ns = 1_000_000_000 // sc.host.hz
    usecs = sc.kernel.netdev_budget_usecs or 2 * 1_000_000 // sc.host.hz
    budget_j = max(1, math.ceil(usecs * 1000 / jiffy_ns))  # usecs_to_jiffies rounds up
    rps_map, rps_len, masks = _rps_maps(sc)
    irq = sc.nic.irq_affinity or [q % ncpu for q in range(nq)]

    # --- costs ------------------------------------------------------------------------
    costs = stage_costs(sc.host.cost_profile, sc.host.costs)
    cost_ns = np.array([costs[s] for s in STAGES], np.float64)
    jmask = np.array([s in JITTERED for s in STAGES], np.bool_)
    jk = {"deterministic": JITTER_NONE, "exponential": JITTER_EXP,
          "lognormal": JITTER_LOGNORMAL}[sc.host.cost_jitter.dist]
    sigma = math.sqrt(math.log(1 + sc.host.cost_jitter.cv ** 2))

    # --- applications: one thread and one socket per listed CPU -----------------------
    threads, th_cpu, th_user, th_sys, th_batch, sock_rcvbuf = [], [], [], [], [], []
    th_app, sock_record, sock_cap_l, xsk_copy, fill_bound = [], [], [], [], []
    sock_tcp = []
    xsk_of_queue = np.full(nq, -1, I64)
    flow_sock = np.full(len(fl), -1, I64)
    for ai, app in enumerate(sc.apps):
        cpus = app.cpu_list()
        first = len(threads)
        xs = app.afxdp
        record = app.connected
        names = fl.group_names if app.groups == "all" else app.groups
        sel = np.isin(fl.group, [fl.group_names.index(g) for g in names])
        tcp = bool(sel.any() and (fl.proto[sel] == 6).all())  # established TCP sockets
        if record is None:  # sock_rps_record_flow (include/net/rps.h) needs TCP_ESTABLISHED
            record = tcp
        for k, c in enumerate(cpus):
            threads.append((app.name, c))
            th_cpu.append(c)
            th_user.append(app.cost.user_ns)
            # AF_XDP: the thread reads descriptors from a mapped ring, no recvmsg
            default_sys = 0.0 if xs else costs["recvmsg"]
            th_sys.append(default_sys if app.cost.syscall_ns is None else app.cost.syscall_ns)
            th_batch.append(app.batch)
            th_app.append(ai)
            sock_record.append(record and not xs)
            sock_tcp.append(tcp and not xs)
            if xs:
                q = xs.queues[k]
                xsk_of_queue[q] = len(threads) - 1
                frames = min(xs.fill_ring, xs.umem_frames)
                sock_cap_l.append(min(xs.rx_ring, frames))
                fill_bound.append(frames < xs.rx_ring)
                xsk_copy.append(xs.mode == "copy")
                sock_rcvbuf.append(1 << 62)  # no skb, no rmem accounting
            else:
                sock_cap_l.append(app.rcvbuf // K.SKB_TRUESIZE_MIN + 2)
                fill_bound.append(False)
                xsk_copy.append(False)
                sock_rcvbuf.append(app.rcvbuf)
        if xs:
            continue  # flows reach an XSK only through the XDP program
        groups = fl.group_names if app.groups == "all" else app.groups
        gidx = [fl.group_names.index(g) for g in groups]
        rows = np.isin(fl.group, gidx) & (flow_sock < 0)
        if app.spread == "round_robin":
            pick = np.arange(int(rows.sum()), dtype=I64) % len(cpus)
        else:
            # SO_REUSEPORT: reciprocal_scale(ehashfn of the 4-tuple, n), not the skb hash
            h = lookup_hash(fl, ehash_secrets(sc.seed), kb.inet6_hash_whole, rows)
            pick = reuseport_pick(h, len(cpus))
        flow_sock[rows] = first + pick
    nth = len(threads)
    sock_cap = np.array(sock_cap_l, I64)
    sock_store = np.array([roundup_pow_of_two(int(c)) for c in sock_cap], I64)
    sock_off = np.concatenate([[0], np.cumsum(sock_store)]).astype(I64)
    per_cpu = [[t for t in range(nth) if th_cpu[t] == c] for c in range(ncpu)]
    maxt = max(1, nth)  # a CPU may end up with every thread after migrations
    cpu_threads = np.full((ncpu, maxt), -1, I64)
    for c, lst in enumerate(per_cpu):
        cpu_threads[c, : len(lst)] = lst

    rfs_on = bool(sock_entries) and bool(dev_logs.any())
    arfs = sc.nic.arfs
    arfs_model = ARFS_MODELS.index(arfs.model) if arfs else ARFS_OFF
    cpu_rmap = np.full(ncpu, -1, I64)
    for q in reversed(range(nq)):
        cpu_rmap[irq[q]] = q  # cpu_rmap_lookup_index: the queue whose IRQ is on the CPU
    mig = _migration(sc, nth, ncpu, th_app)
    xd = compile_xdp(sc, fl, steer, costs, kb, xdp_program)
    flow = np.zeros(len(fl), FLOW)  # one record per flow
    flow["flow_rxq"], flow["flow_hash"] = steer["rxq"], steer["skb_hash"]
    flow["flow_sock"] = flow_sock
    flow["flow_tt"] = (fl.proto == 17).astype(I64) + 2 * fl.is_v6.astype(I64)
    flow["flow_sport"], flow["flow_dport"] = fl.sport, fl.dport
    flow["flow_udp"] = fl.proto == 17
    for name in ("xdp_act", "xdp_rule", "xdp_cpu", "flow_sw_hash", "flow_rss_hash"):
        flow[name] = xd.pop(name)
    interval_ns, n_int = est.interval_ns, est.intervals  # at most max_intervals(ncpu)
    bl_cap = roundup_pow_of_two(2 * (sc.kernel.netdev_max_backlog + 1) + 8)
    lists = nq + 2
    queue = np.zeros(nq, QUEUE_PARAMS)
    queue["irq_cpu"], queue["rps_len"] = irq, rps_len
    queue["xsk_of_queue"] = xsk_of_queue
    queue["napi_cpu"] = napi_thread_cpus(sc, irq)
    cpu = np.zeros(ncpu, CPU_PARAMS)
    cpu["cpu_rmap"], cpu["cm_entry"] = cpu_rmap, xd.pop("cm_entry")
    cm_cpu = xd.pop("cm_cpu")
    cpumap = np.zeros(len(cm_cpu), CPUMAP_PARAMS)
    cpumap["cpu"], cpumap["qsize"], cpumap["batch"] = cm_cpu, xd.pop("cm_qsize"), xd.pop(
        "cm_batch")

    p = Params(
        ncpu=ncpu, nq=nq, nthreads=nth, ring_size=sc.nic.ring_size,
        napi_weight=sc.nic.napi_weight, dev_rx_weight=sc.kernel.dev_weight,
        netdev_budget=sc.kernel.netdev_budget, budget_jiffies=budget_j,
        max_softirq_jiffies=max(1, math.ceil(K.MAX_SOFTIRQ_TIME_MS * 1e6 / jiffy_ns)),
        jiffy_ns=jiffy_ns, max_backlog=sc.kernel.netdev_max_backlog, bl_cap=bl_cap,
        bl_mask=bl_cap - 1, ring_mask=roundup_pow_of_two(sc.nic.ring_size) - 1,
        rps_needed=bool(rps_len.any()) or bool(sock_entries),
        netif_rx=sc.nic.rx_mode == "netif_rx",
        fl_history=hist, fl_log=ilog2(tl),
        fl_hash32=kb.flow_limit_hash_32,
        ksoftirqd_defers=kb.ksoftirqd_defers, napi_threaded=sc.nic.threaded,
        backlog_threaded=sc.kernel.thread_backlog_napi,
        **fair_class_params(kb, ncpu, jiffy_ns),
        jitter_kind=jk, jitter_sigma=sigma,
        interval_ns=interval_ns, interval_inv=1.0 / interval_ns,
        warmup_ns=int(round(sc.metrics.warmup * 1e9)),
        n_intervals=n_int, win_ns=traffic_window_ns(sc.duration, interval_ns, n_int),
        cost_ns=cost_ns, jitter_mask=jmask,
        cost_i=(cost_ns + 0.5).astype(I64),
        irq_delay_ns=int(round(costs["irq_latency"] + sc.nic.rx_usecs * 1000)),
        nic_svc_ns=int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0,
        **driver_poll_params(sc.nic.preset(), sc.nic.ring_size),
        queue=queue, cpu=cpu, cpumap=cpumap, rps_map=rps_map, flow=flow, sock_off=sock_off,
        rfs_on=rfs_on, sock_flow_mask=max(sock_entries - 1, 0),
        rps_cpu_mask=roundup_pow_of_two(ncpu) - 1, rfs_hash32=kb.rfs_hash32,
        arfs_model=arfs_model, arfs_protect=kb.rps_dev_flow_hash,
        arfs_capacity=arfs.capacity if arfs else 0,
        arfs_delay_ns=int(round(arfs.delay_us * 1e3)) if arfs else 0,
        arfs_period_ns=int(round(arfs.period_s * 1e9)) if arfs else 0,
        mig_set=mig[1], mig_t=mig[3], mig_cpu=mig[4], **xd,
    )
    R = roundup_pow_of_two(sc.nic.ring_size)
    nic = NicState(ring=np.zeros((nq, R), SKB), queue=np.zeros(nq, RX_RING),
                   pause=np.zeros(1, POLL_PAUSE), thread=np.zeros(nq + ncpu, NAPI_KTHREAD))
    nic.thread["nt_rewake"] = -1
    sd = SoftnetData(
        cpu=np.zeros(ncpu, SOFTNET_DATA), bl=np.zeros((ncpu, bl_cap), SKB),
        poll_list=np.zeros((ncpu, lists), I64), local_list=np.zeros((ncpu, lists), I64),
        repoll=np.zeros((ncpu, lists), I64),
        rps_ipi_list=np.zeros((ncpu, ncpu), I64),
        fl_history=np.zeros((ncpu, hist), I64), fl_buckets=np.zeros((ncpu, tl), I64),
    )
    sd.cpu["fl_on"] = [c in fl_cpus for c in range(ncpu)]
    sd.cpu["cur_who"] = SCHED_IDLE  # no task holds a CPU yet
    total = int(sock_off[-1]) or 1
    nflows = len(fl)
    so = SockState(
        sq=np.zeros(total, SKB), sock=np.zeros(nth, SOCK), thread=np.zeros(nth, APP_THREAD),
        flow=np.zeros(nflows, FLOW_SEQ),
        cpu_threads=cpu_threads,
        cpu_nthreads=np.array([len(x) for x in per_cpu], I64),
    )
    so.flow["flow_max_seq"] = -1
    sk, app = so.sock, so.thread  # socket i and the thread that reads it
    sk["sock_thread"] = app["thread_sock"] = np.arange(nth)
    sk["sock_rcvbuf"] = sock_rcvbuf
    sk["sock_cap"] = sock_cap
    sk["sock_mask"] = sock_store - 1
    sk["sock_record"] = sock_record
    sk["sock_tcp"] = sock_tcp
    sk["sock_xsk_copy"] = xsk_copy
    sk["sock_fill_bound"] = fill_bound
    app["thread_user_ns"] = th_user
    app["thread_sys_ns"] = th_sys
    app["thread_batch"] = th_batch
    app["thread_cpu"] = th_cpu
    app["mig_every_ns"], app["mig_set_n"], app["mig_n"] = mig[0], mig[2], mig[5]
    rf = new_rfs_state(nq, sock_entries, dev_logs)
    ar = new_arfs_state(max(2 * nflows, arfs.capacity) if arfs else 1, arfs_model, nflows)
    cm = new_cpumap_state(ncpu, p.cpumap, len(p.xdp_rr_n))
    st = new_stats(ncpu, n_int, sc.seed)
    # calendar: at most one pending CPU event per CPU, one IRQ per queue, one wake per
    # thread, and IPIs (at most one in flight per target and per backlog re-wake)
    ev = new_calendar(4 * (ncpu + nq + nth) + 64)
    for th in range(nth):
        if so.thread[th]["mig_n"]:
            schedule(ev, int(p.mig_t[th, 0]), PRIO_WAKE, EV_MIGRATE, th)
        elif so.thread[th]["mig_every_ns"]:
            schedule(ev, int(so.thread[th]["mig_every_ns"]), PRIO_WAKE, EV_MIGRATE, th)
    if arfs_model in (ARFS_ICE_HASH_MATCH, ARFS_ICE_TUPLE_MATCH):
        # ice's service timer (mlx5 has none: its work items expire)
        schedule(ev, p.arfs_period_ns, PRIO_TIMER, EV_ARFS_TIMER, 0)
    config = {
        "kernel": sc.host.kernel,
        "driver": drivers.report(sc.nic.preset(), sc.nic.from_preset()),
        "softnet_stat_columns": kb.softnet_columns,
        "rps_cpus": masks,
        "rps_needed": p.rps_needed,
        "rx_mode": sc.nic.rx_mode,
        "flow_limit_cpus": fl_cpus,
        "flow_limit_table_len": tl,
        "flow_limit_history": hist,
        "flow_limit_bucket": "hash_32" if p.fl_hash32 else "hash & (len - 1)",
        "netdev_budget_usecs": usecs,
        "budget_jiffies": budget_j,
        "hz": sc.host.hz,
        "irq_affinity": list(irq),
        "indirection_table": steer["table"].tolist(),
        "ksoftirqd_defers": kb.ksoftirqd_defers,
        "threaded": sc.nic.threaded,
        "napi_thread_affinity": ([int(c) for c in p.queue["napi_cpu"]] if sc.nic.threaded
                                 else None),
        "cost_profile": sc.host.cost_profile,
        "costs_ns": costs,
        "flows": nflows,
        "rps_sock_flow_entries": sock_entries,
        "rps_flow_cnt": [1 << int(x) if x else 0 for x in dev_logs],
        "rfs_slot": "hash_32" if p.rfs_hash32 else "hash & mask",
        "arfs": arfs.model if arfs else None,
        "arfs_protect_active": bool(arfs) and p.arfs_protect,
        "threads": [{"app": a, "cpu": c} for a, c in threads],
        "interval_s": interval_ns / 1e9,
        "intervals": n_int,
        **xdp_config(sc, p),
    }
    # one huge-page arena for all the loop's arrays: a TLB miss per touch otherwise
    p, nic, sd, so, st, ev, rf, ar, cm = relocate([p, nic, sd, so, st, ev, rf, ar, cm])
    return Model(sc, p, nic, sd, so, st, ev, rf, ar, cm, fl, kb, config, threads=threads,
                 capture=capture, notices=[est.notice] if est.notice else [])
