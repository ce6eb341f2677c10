"""Compile a validated Scenario into the arrays the jitted loop runs on.

All per-flow work happens here, vectorised, once: the RSS hash and queue of every flow,
its skb hash (hardware L4 hash or the kernel's software SipHash), its socket. Values the
kernel rounds are rounded here and reported in ``Model.config``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from rxlab import drivers
from rxlab.engine.arena import relocate
from rxlab.engine.core import PRIO_TIMER, PRIO_WAKE, Calendar, new_calendar, schedule
from rxlab.engine.rng import JITTER_EXP, JITTER_LOGNORMAL, JITTER_NONE
from rxlab.errors import UsageError
from rxlab.kernel import constants as K
from rxlab.kernel.accounting import new_stats
from rxlab.kernel.backlog import new_softnet_data
from rxlab.kernel.events import EV_ARFS_TIMER, EV_MIGRATE
from rxlab.kernel.flow_hash import skb_get_hash_flows
from rxlab.kernel.hashfn import ilog2, roundup_pow_of_two
from rxlab.kernel.nic_rx import new_nic_state
from rxlab.kernel.rfs import new_rfs_state
from rxlab.kernel.sched import fair_class_params
from rxlab.kernel.socket import new_sock_state, sock_queue_offsets
from rxlab.kernel.stages import JITTERED, STAGES
from rxlab.kernel.state import (
    ARFS_ICE_HASH_MATCH,
    ARFS_ICE_TUPLE_MATCH,
    ARFS_MODELS,
    ARFS_OFF,
    CPU_PARAMS,
    CPUMAP_PARAMS,
    FLOW,
    QUEUE_PARAMS,
    REFILL_AFTER_LOOP,
    REFILL_IN_LOOP,
    REFILL_PER_PACKET,
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
from rxlab.mechanisms import CPUMAP, FLOW_LIMIT, NIC, RFS, RPS
from rxlab.mechanisms.flow_limit import history_len as flow_limit_history
from rxlab.mechanisms.rfs import table_sizes as rfs_table_sizes
from rxlab.mechanisms.rps import backlog_capacity
from rxlab.memory_budget import Estimate
from rxlab.memory_budget import check as check_memory
from rxlab.nic.arfs import new_arfs_state
from rxlab.nic.toeplitz import MS_RSS_KEY, parse_key, rss_hash_flows, v4_mapped
from rxlab.profiles import stage_costs
from rxlab.reuseport import ehash_secrets, lookup_hash, reuseport_pick
from rxlab.scenario import Scenario, hex_mask_to_cpus
from rxlab.scenario_checks import per_queue
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


class _KernelKnobs(NamedTuple):
    """The scenario's kernel settings, rounded and expanded the kernel's way (the loop's
    parameters, and reported in ``Model.config``)."""

    irq: list  # each rx queue's IRQ CPU
    rps_map: np.ndarray  # int64[nq, ncpu]: each queue's rps_map CPUs
    rps_len: np.ndarray  # int64[nq]
    rps_masks: list  # each queue's rps_cpus mask as given
    sock_entries: int  # rps_sock_flow_entries, rounded
    dev_logs: np.ndarray  # int64[nq]: log2 of each queue's rps_flow_cnt, or 0
    fl_cpus: list  # flow_limit_cpu_bitmap's CPUs
    fl_history: int  # flow limit history length (by variant)
    jiffy_ns: int
    budget_usecs: int  # netdev_budget_usecs (default: 2 jiffies)
    budget_jiffies: int


def _kernel_knobs(sc: Scenario, sock_entries: int, dev_logs: np.ndarray) -> _KernelKnobs:
    """The kernel knobs, rounded / validated the kernel's way; the RFS tables' sizes
    (``mechanisms.rfs.table_sizes``) are passed in."""
    ncpu, nq = sc.host.cpus, sc.nic.queues
    fl_cpus = hex_mask_to_cpus(sc.kernel.flow_limit_cpu_bitmap)
    hist = flow_limit_history(sc.kernel)
    jiffy_ns = 1_000_000_000 // sc.host.hz
    usecs = sc.kernel.netdev_budget_usecs or 2 * 1_000_000 // sc.host.hz
    budget_j = max(1, math.ceil(usecs * 1000 / jiffy_ns))  # usecs_to_jiffies rounds up
    rps_map, rps_len, masks = _rps_maps(sc)
    irq = sc.nic.irq_affinity or [q % ncpu for q in range(nq)]
    return _KernelKnobs(irq=irq, rps_map=rps_map, rps_len=rps_len, rps_masks=masks,
                        sock_entries=sock_entries, dev_logs=dev_logs, fl_cpus=fl_cpus,
                        fl_history=hist, jiffy_ns=jiffy_ns, budget_usecs=usecs,
                        budget_jiffies=budget_j)


def _flow_table(sc: Scenario, capture) -> tuple[FlowTable, object]:
    """The flows of the scenario's traffic, and the capture they replay (opened here
    if ``traffic.pcap`` is set and none was passed), or None."""
    if sc.traffic.pcap is not None:
        if capture is None:
            from rxlab.capture.pcap import open_capture

            pc = sc.traffic.pcap
            capture = open_capture(pc.file, speedup=pc.speedup,
                                   allow_truncated=pc.allow_truncated)
        return capture.flows, capture
    return build_flows(sc.traffic, sc.seed), capture


@dataclass
class AppThreads:
    """One thread and one socket per CPU an application lists, in the order of
    ``sc.apps`` and their CPUs (thread i reads socket i), and the socket of every flow."""

    xsk_of_queue: np.ndarray  # XSKMAP[rx queue]: socket, or -1
    flow_sock: np.ndarray  # socket of each flow, or -1
    threads: list = field(default_factory=list)  # (app name, cpu) per thread
    app: list = field(default_factory=list)  # index in sc.apps per thread
    # APP_THREAD and SOCK fields, one value per thread / socket
    thread: dict = field(default_factory=lambda: {
        k: [] for k in ("thread_cpu", "thread_user_ns", "thread_sys_ns", "thread_batch")})
    sock: dict = field(default_factory=lambda: {
        k: [] for k in ("sock_rcvbuf", "sock_cap", "sock_record", "sock_tcp",
                        "sock_xsk_copy", "sock_fill_bound", "sock_ll_usec", "sock_bp_prefer",
                        "sock_bp_budget")})


def _app_threads(sc: Scenario, fl: FlowTable, kb: KernelBehaviour, costs: dict) -> AppThreads:
    """Every application's threads and sockets; each flow of its groups (not taken by an
    earlier application) to one of its sockets."""
    at = AppThreads(np.full(sc.nic.queues, -1, I64), np.full(len(fl), -1, I64))
    for ai, app in enumerate(sc.apps):
        cpus = app.cpu_list()
        first = len(at.threads)
        _add_threads(at, ai, app, cpus, fl, costs, sc.kernel.busy_read)
        if app.afxdp:
            continue  # flows reach an XSK only through the XDP program
        _pick_sockets(sc, fl, kb, app, first, len(cpus), at.flow_sock)
    return at


def _add_threads(at: AppThreads, ai: int, app, cpus: list[int], fl: FlowTable,
                 costs: dict, busy_read: int) -> None:
    """Application ``ai``'s threads, one per CPU, each with its socket (AF_XDP: its XSK
    on the queue of the same rank, bound in ``xsk_of_queue``)."""
    xs = app.afxdp
    record = app.connected
    names = fl.group_names if app.groups == "all" else app.groups
    sel = np.isin(fl.group, [fl.group_names.index(g) for g in names])
    tcp = bool(sel.any() and (fl.proto[sel] == 6).all())  # established TCP sockets
    if record is None:  # sock_rps_record_flow (include/net/rps.h) needs TCP_ESTABLISHED
        record = tcp
    # sock_init_data: sk_ll_usec = net.core.busy_read, unless SO_BUSY_POLL sets it
    busy = dict(sock_ll_usec=app.busy_poll if app.busy_poll is not None else busy_read,
                sock_bp_prefer=app.prefer_busy_poll, sock_bp_budget=app.busy_poll_budget)
    for k, c in enumerate(cpus):
        at.threads.append((app.name, c))
        at.app.append(ai)
        # AF_XDP: the thread reads descriptors from a mapped ring, no recvmsg
        default_sys = 0.0 if xs else costs["recvmsg"]
        _append(at.thread, thread_cpu=c, thread_user_ns=app.cost.user_ns,
                thread_sys_ns=default_sys if app.cost.syscall_ns is None
                else app.cost.syscall_ns, thread_batch=app.batch)
        if xs:
            at.xsk_of_queue[xs.queues[k]] = len(at.threads) - 1
            frames = min(xs.fill_ring, xs.umem_frames)
            _append(at.sock, sock_rcvbuf=1 << 62,  # no skb, no rmem accounting
                    sock_cap=min(xs.rx_ring, frames), sock_record=False, sock_tcp=False,
                    sock_xsk_copy=xs.mode == "copy", sock_fill_bound=frames < xs.rx_ring,
                    sock_ll_usec=0, sock_bp_prefer=False, sock_bp_budget=0)
        else:
            _append(at.sock, sock_rcvbuf=app.rcvbuf,
                    sock_cap=app.rcvbuf // K.SKB_TRUESIZE_MIN + 2, sock_record=record,
                    sock_tcp=tcp, sock_xsk_copy=False, sock_fill_bound=False, **busy)


def _append(columns: dict, **row) -> None:
    for name, value in row.items():
        columns[name].append(value)


def _pick_sockets(sc: Scenario, fl: FlowTable, kb: KernelBehaviour, app, first: int,
                  n: int, flow_sock: np.ndarray) -> None:
    """Each of ``app``'s flows still without a socket gets one of its ``n`` sockets from
    ``first`` on: round robin, or SO_REUSEPORT's pick."""
    groups = fl.group_names if app.groups == "all" else app.groups
    gidx = [fl.group_names.index(g) for g in groups]
    rows = np.isin(fl.group, gidx) & (flow_sock < 0)
    if app.spread == "round_robin":
        pick = np.arange(int(rows.sum()), dtype=I64) % n
    else:
        # SO_REUSEPORT: reciprocal_scale(ehashfn of the 4-tuple, n), not the skb hash
        h = lookup_hash(fl, ehash_secrets(sc.seed), kb.inet6_hash_whole, rows)
        pick = reuseport_pick(h, n)
    flow_sock[rows] = first + pick


def _flow_records(fl: FlowTable, steer: dict, flow_sock: np.ndarray, xd: dict) -> np.ndarray:
    """One FLOW record per flow: its steering, socket and XDP verdict (taken out of
    ``xd``, the rest of which are Params fields)."""
    flow = np.zeros(len(fl), FLOW)
    flow["flow_rxq"], flow["flow_hash"] = steer["rxq"], steer["skb_hash"]
    flow["flow_sock"] = flow_sock
    flow["flow_tt"] = (fl.proto == 17).astype(I64) + 2 * fl.is_v6.astype(I64)
    flow["flow_sport"], flow["flow_dport"] = fl.sport, fl.dport
    flow["flow_udp"] = fl.proto == 17
    for name in ("xdp_act", "xdp_rule", "xdp_cpu", "flow_sw_hash", "flow_rss_hash"):
        flow[name] = xd.pop(name)
    return flow


def _queue_params(sc: Scenario, knobs: _KernelKnobs, xsk_of_queue: np.ndarray) -> np.ndarray:
    """QUEUE_PARAMS per rx queue: its IRQ CPU, rps_map length, XSK, NAPI kthread CPU,
    its NAPI's IRQ deferral."""
    queue = np.zeros(sc.nic.queues, QUEUE_PARAMS)
    queue["irq_cpu"], queue["rps_len"] = knobs.irq, knobs.rps_len
    queue["xsk_of_queue"] = xsk_of_queue
    queue["napi_cpu"] = napi_thread_cpus(sc, knobs.irq)
    queue["defer_hard_irqs"] = per_queue(sc.nic.napi_defer_hard_irqs, sc.nic.queues)
    queue["gro_flush_ns"] = per_queue(sc.nic.gro_flush_timeout, sc.nic.queues)
    return queue


def _cpu_params(ncpu: int, irq: list[int], cm_entry: np.ndarray) -> np.ndarray:
    """CPU_PARAMS per CPU: the rx queue whose IRQ is on it, its cpumap entry."""
    cpu_rmap = np.full(ncpu, -1, I64)
    for q in reversed(range(len(irq))):
        cpu_rmap[irq[q]] = q  # cpu_rmap_lookup_index: the queue whose IRQ is on the CPU
    cpu = np.zeros(ncpu, CPU_PARAMS)
    cpu["cpu_rmap"], cpu["cm_entry"] = cpu_rmap, cm_entry
    return cpu


def _cpumap_params(xd: dict) -> np.ndarray:
    """CPUMAP_PARAMS per cpumap entry (taken out of ``xd``)."""
    cm_cpu = xd.pop("cm_cpu")
    cpumap = np.zeros(len(cm_cpu), CPUMAP_PARAMS)
    cpumap["cpu"], cpumap["qsize"], cpumap["batch"] = cm_cpu, xd.pop("cm_qsize"), xd.pop(
        "cm_batch")
    return cpumap


def _softirq_params(sc: Scenario, kb: KernelBehaviour, knobs: _KernelKnobs) -> dict:
    """net_rx_action's budgets and handle_softirqs' limits."""
    return dict(
        napi_weight=sc.nic.napi_weight, dev_rx_weight=sc.kernel.dev_weight,
        netdev_budget=sc.kernel.netdev_budget, budget_jiffies=knobs.budget_jiffies,
        max_softirq_jiffies=max(1, math.ceil(K.MAX_SOFTIRQ_TIME_MS * 1e6 / knobs.jiffy_ns)),
        jiffy_ns=knobs.jiffy_ns, ksoftirqd_defers=kb.ksoftirqd_defers,
    )


def _backlog_params(sc: Scenario, kb: KernelBehaviour, knobs: _KernelKnobs) -> dict:
    """The per-CPU backlog (its storage), flow limit and backlog NAPI threads."""
    bl_cap = backlog_capacity(sc.kernel)
    return dict(
        max_backlog=sc.kernel.netdev_max_backlog, bl_cap=bl_cap, bl_mask=bl_cap - 1,
        fl_history=knobs.fl_history, fl_log=ilog2(sc.kernel.flow_limit_table_len),
        fl_hash32=kb.flow_limit_hash_32, backlog_threaded=sc.kernel.thread_backlog_napi,
    )


def _nic_params(sc: Scenario, costs: dict) -> dict:
    """The rx ring, the interrupt's delay, the NIC's packet-rate ceiling and the
    driver's poll."""
    return dict(
        ring_size=sc.nic.ring_size, ring_mask=roundup_pow_of_two(sc.nic.ring_size) - 1,
        netif_rx=sc.nic.rx_mode == "netif_rx", napi_threaded=sc.nic.threaded,
        napi_defer_on=any(d > 0 and g > 0 for d, g in zip(
            per_queue(sc.nic.napi_defer_hard_irqs, sc.nic.queues),
            per_queue(sc.nic.gro_flush_timeout, sc.nic.queues), strict=True)),
        irq_delay_ns=int(round(costs["irq_latency"] + sc.nic.rx_usecs * 1000)),
        nic_svc_ns=int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0,
        **driver_poll_params(sc.nic.preset(), sc.nic.ring_size),
    )


def _cost_params(sc: Scenario, costs: dict) -> dict:
    """Each stage's cost (ns, and rounded), which stages jitter, and how."""
    cost_ns = np.array([costs[s] for s in STAGES], np.float64)
    jk = {"deterministic": JITTER_NONE, "exponential": JITTER_EXP,
          "lognormal": JITTER_LOGNORMAL}[sc.host.cost_jitter.dist]
    return dict(
        jitter_kind=jk, jitter_sigma=math.sqrt(math.log(1 + sc.host.cost_jitter.cv ** 2)),
        cost_ns=cost_ns, jitter_mask=np.array([s in JITTERED for s in STAGES], np.bool_),
        cost_i=(cost_ns + 0.5).astype(I64),
    )


def _interval_params(sc: Scenario, est: Estimate) -> dict:
    """The time series' intervals (at most max_intervals(ncpu)), warm-up and window."""
    interval_ns, n_int = est.interval_ns, est.intervals
    return dict(
        interval_ns=interval_ns, interval_inv=1.0 / interval_ns,
        warmup_ns=int(round(sc.metrics.warmup * 1e9)),
        n_intervals=n_int, win_ns=traffic_window_ns(sc.duration, interval_ns, n_int),
    )


def _steering_params(sc: Scenario, kb: KernelBehaviour, knobs: _KernelKnobs) -> dict:
    """RPS, RFS and aRFS (get_rps_cpu, set_rps_cpu, the driver's filters)."""
    arfs = sc.nic.arfs
    return dict(
        rps_needed=bool(knobs.rps_len.any()) or bool(knobs.sock_entries),
        rfs_on=bool(knobs.sock_entries) and bool(knobs.dev_logs.any()),
        sock_flow_mask=max(knobs.sock_entries - 1, 0),
        rps_cpu_mask=roundup_pow_of_two(sc.host.cpus) - 1, rfs_hash32=kb.rfs_hash32,
        arfs_model=ARFS_MODELS.index(arfs.model) if arfs else ARFS_OFF,
        arfs_protect=kb.rps_dev_flow_hash, arfs_capacity=arfs.capacity if arfs else 0,
        arfs_delay_ns=int(round(arfs.delay_us * 1e3)) if arfs else 0,
        arfs_period_ns=int(round(arfs.service_period_s * 1e9)) if arfs else 0,
    )


def _params(sc: Scenario, kb: KernelBehaviour, knobs: _KernelKnobs, est: Estimate,
            costs: dict, at: AppThreads, flow: np.ndarray, sock_off: np.ndarray, mig: tuple,
            xd: dict) -> Params:
    """The loop's read-only configuration; ``xd`` gives the XDP program's fields."""
    ncpu = sc.host.cpus
    cpu = _cpu_params(ncpu, knobs.irq, xd.pop("cm_entry"))
    cpumap = _cpumap_params(xd)
    return Params(
        ncpu=ncpu, nq=sc.nic.queues, nthreads=len(at.threads),
        **_softirq_params(sc, kb, knobs), **_backlog_params(sc, kb, knobs),
        **fair_class_params(kb, ncpu, knobs.jiffy_ns), **_cost_params(sc, costs),
        **_interval_params(sc, est), **_nic_params(sc, costs),
        **_steering_params(sc, kb, knobs),
        queue=_queue_params(sc, knobs, at.xsk_of_queue), cpu=cpu, cpumap=cpumap,
        rps_map=knobs.rps_map, flow=flow, sock_off=sock_off,
        mig_set=mig[1], mig_t=mig[3], mig_cpu=mig[4], **xd,
        busy_poll_on=any(u > 0 for u in at.sock["sock_ll_usec"]),
    )


def _calendar(p: Params, so: SockState) -> Calendar:
    """The event calendar with the run's first timers: each thread's first migration,
    ice's aRFS service timer."""
    ncpu, nq, nth = p.ncpu, p.nq, p.nthreads
    # calendar: at most one pending CPU event per CPU, one IRQ per queue, one wake per
    # thread, and IPIs (at most one in flight per target and per backlog re-wake)
    ev = new_calendar(4 * (ncpu + nq + nth) + 64)
    for th in range(nth):
        if so.thread[th]["mig_n"]:
            schedule(ev, int(p.mig_t[th, 0]), PRIO_WAKE, EV_MIGRATE, th)
        elif so.thread[th]["mig_every_ns"]:
            schedule(ev, int(so.thread[th]["mig_every_ns"]), PRIO_WAKE, EV_MIGRATE, th)
    if p.arfs_model in (ARFS_ICE_HASH_MATCH, ARFS_ICE_TUPLE_MATCH):
        # ice's service timer (mlx5 has none: its work items expire)
        schedule(ev, p.arfs_period_ns, PRIO_TIMER, EV_ARFS_TIMER, 0)
    return ev


def _config(sc: Scenario, kb: KernelBehaviour, p: Params, knobs: _KernelKnobs, steer: dict,
            costs: dict, threads: list) -> dict:
    """The effective (rounded) settings, as ``Model.config`` reports them."""
    arfs = sc.nic.arfs
    return {
        "kernel": sc.host.kernel,
        "driver": drivers.report(sc.nic.preset(), sc.nic.from_preset()),
        "softnet_stat_columns": kb.softnet_columns,
        "rps_cpus": knobs.rps_masks,
        "rps_needed": p.rps_needed,
        "rx_mode": sc.nic.rx_mode,
        "flow_limit_cpus": knobs.fl_cpus,
        "flow_limit_table_len": sc.kernel.flow_limit_table_len,
        "flow_limit_history": knobs.fl_history,
        "flow_limit_bucket": "hash_32" if p.fl_hash32 else "hash & (len - 1)",
        "netdev_budget_usecs": knobs.budget_usecs,
        "budget_jiffies": knobs.budget_jiffies,
        "hz": sc.host.hz,
        "irq_affinity": list(knobs.irq),
        "indirection_table": steer["table"].tolist(),
        "ksoftirqd_defers": kb.ksoftirqd_defers,
        "threaded": sc.nic.threaded,
        "napi_thread_affinity": ([int(c) for c in p.queue["napi_cpu"]] if sc.nic.threaded
                                 else None),
        "cost_profile": sc.host.cost_profile,
        "costs_ns": costs,
        "flows": len(p.flow),
        "rps_sock_flow_entries": knobs.sock_entries,
        "rps_flow_cnt": [1 << int(x) if x else 0 for x in knobs.dev_logs],
        "rfs_slot": "hash_32" if p.rfs_hash32 else "hash & mask",
        "arfs": arfs.model if arfs else None,
        "arfs_protect_active": bool(arfs) and p.arfs_protect,
        "threads": [{"app": a, "cpu": c} for a, c in threads],
        "interval_s": p.interval_ns / 1e9,
        "intervals": p.n_intervals,
        **xdp_config(sc, p),
    }


def build(sc: Scenario, capture=None, xdp_program=None, max_memory=None) -> Model:
    """Compile a scenario; ``capture`` is an already opened pcap for ``traffic.pcap``;
    ``xdp_program`` a vectorised per-flow XDP program (``rxlab.xdp.rules``).

    The memory the scenario implies is checked against ``max_memory`` (bytes or a size
    such as '8GiB'; default: ``rxlab.memory_budget.default_limit``) before anything is
    allocated; over it, a one-line UsageError names the field."""
    kb = behaviour(sc.host.kernel)
    ncpu, nq = sc.host.cpus, sc.nic.queues
    sock_entries, dev_logs = rfs_table_sizes(sc)
    est = check_memory(sc, max_memory, capture)
    fl, capture = _flow_table(sc, capture)
    nflows = len(fl)
    steer = flow_steering(sc, fl)
    knobs = _kernel_knobs(sc, sock_entries, dev_logs)
    costs = stage_costs(sc.host.cost_profile, sc.host.costs)
    at = _app_threads(sc, fl, kb, costs)
    sock_off = sock_queue_offsets(at.sock["sock_cap"])
    mig = _migration(sc, len(at.threads), ncpu, at.app)
    xd = compile_xdp(sc, fl, steer, costs, kb, xdp_program)
    flow = _flow_records(fl, steer, at.flow_sock, xd)
    p = _params(sc, kb, knobs, est, costs, at, flow, sock_off, mig, xd)

    nic = new_nic_state(NIC.state(sc))
    sd = new_softnet_data(ncpu, nq, {**RPS.state(sc), **FLOW_LIMIT.state(sc)}, knobs.fl_cpus)
    so = new_sock_state(ncpu, nflows, sock_off, at.sock, {
        **at.thread, "mig_every_ns": mig[0], "mig_set_n": mig[2], "mig_n": mig[5]})
    rf = new_rfs_state(RFS.state(sc), dev_logs)
    arfs = sc.nic.arfs
    ar = new_arfs_state(max(2 * nflows, arfs.capacity) if arfs else 1, p.arfs_model, nflows)
    cm = new_cpumap_state(CPUMAP.state(sc))
    st = new_stats(ncpu, p.n_intervals, sc.seed)
    ev = _calendar(p, so)
    config = _config(sc, kb, p, knobs, steer, costs, at.threads)
    # one huge-page arena for all the loop's arrays: a TLB miss per touch otherwise
    p, nic, sd, so, st, ev, rf, ar, cm = relocate([p, nic, sd, so, st, ev, rf, ar, cm])
    return Model(sc, p, nic, sd, so, st, ev, rf, ar, cm, fl, kb, config, threads=at.threads,
                 capture=capture, notices=[est.notice] if est.notice else [])
