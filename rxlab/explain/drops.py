"""Drops by reason -> the places that dropped, the flows there, and the settings.

The places are where the kernel counts each reason: ``ring_full`` on the rx queue
(ethtool -S rx_queue_N drops), ``backlog`` and ``flow_limit`` in the target CPU's
softnet_stat ``dropped`` column (enqueue_to_backlog() in net/core/dev.c counts both
there; skb_flow_limit() counts ``flow_limit_count`` on the enqueuing CPU),
``socket_rcvbuf`` and ``socket_backlog`` on the socket (sk_drops:
__udp_enqueue_schedule_skb() in net/ipv4/udp.c, tcp_v4_rcv() and tcp_add_backlog() in
net/ipv4/tcp_ipv4.c). A flow's packets are counted where it goes: its RSS queue, its
backlog CPU (RPS/RFS), its socket (SO_REUSEPORT).
"""

from __future__ import annotations

from rxlab.explain.common import (
    batched_reads,
    cpu_roles,
    describe_cpu,
    flows_at,
    least_loaded_queue,
    mask_of,
    now,
    pct,
    rps_masks,
    setting,
    spare_cpus,
    tuple_rule,
)
from rxlab.explain.inputs import Subject


def explain_drops(sub: Subject, dev: str = "DEV", top: int = 5) -> dict:
    d = sub.data
    pk = d["packets"]
    by = {k: v for k, v in pk["dropped_by_reason"].items() if v}
    causes: list[dict] = []
    if by.get("ring_full"):
        causes += _ring_full(sub, dev, top)
    if by.get("backlog") or by.get("flow_limit"):
        causes += _backlog(sub, dev, top)
    if by.get("flow_limit"):
        causes += _flow_limit(sub, dev, top)
    if by.get("socket_rcvbuf") or by.get("socket_backlog"):
        causes += _socket(sub, dev, top)
    if by.get("no_socket"):
        causes.append(_no_socket(sub, top))
    if by.get("nic_overrun"):
        causes.append(_simple(sub, "nic_overrun", "the NIC's packet-rate ceiling "
                              "(nic.max_pps) was exceeded before any queue",
                              [setting("nic.max_pps", "a property of the NIC: no host "
                                       "setting moves it; offer less or use a faster NIC")]))
    for reason, text, sets in _OTHER:
        if by.get(reason):
            causes.append(_simple(sub, reason, text, [setting(s, w) for s, w in sets]))
    causes.sort(key=lambda c: -c["packets"])  # the largest first (stable: path order)
    return {"topic": "drops", "scenario": sub.name, "kernel": d.get("kernel"),
            "offered": pk["offered"], "delivered": pk["delivered"], "dropped": pk["dropped"],
            "dropped_by_reason": by, "causes": causes, "softirq_budget": squeeze(sub),
            "notes": sub.notes}


_OTHER = [
    ("xdp_drop", "the XDP program returned XDP_DROP (by its rules)",
     [("xdp.rules / the program's verdicts", "the program decides; nothing queues here")]),
    ("xdp_aborted", "XDP_ABORTED, or a cpumap redirect to a key with no entry",
     [("xdp.rules / cpumap.cpus", "give every redirect key a cpumap entry")]),
    ("cpumap_full", "a cpumap entry's ptr_ring was full (its kthread's CPU is too slow)",
     [("cpumap.qsize (bpf_cpumap_val.qsize)", "a longer ring absorbs bursts"),
      ("cpumap.cpus", "more target CPUs share the load")]),
    ("xsk_rx_ring_full", "an AF_XDP socket's RX ring was full (the reader is behind)",
     [("apps[].afxdp.rx_ring (XDP_RX_RING)", "a longer ring absorbs bursts")]),
    ("xsk_fill_empty", "no UMEM frame on the FILL ring",
     [("apps[].afxdp.fill_ring / umem_frames", "more frames for the driver to fill")]),
]


def _simple(sub: Subject, reason: str, text: str, settings: list[dict]) -> dict:
    n = sub.data["packets"]["dropped_by_reason"][reason]
    return {"reason": reason, "where": "host", "packets": n, "title": f"{reason}: {n:,}",
            "facts": [text], "flows": None, "elephant": None, "settings": settings}


def _flow_facts(sub: Subject, mask, top: int, where: str) -> tuple[dict | None, list[str]]:
    if sub.flows is None:
        return None, []
    f = flows_at(sub, mask, top)
    facts = [f"{f['flows']:,} flows reach {where}: {f['packets']:,} packets, "
             f"{f['lost']:,} of them not delivered"]
    e = f["elephant"]
    if e:
        facts.append(f"elephant flow: {e['flow']} carries {pct(e['share'])} of the packets "
                     f"at {where} ({pct(e['share_of_all'])} of all); RSS bucket "
                     f"{e['rss_bucket']} -> rx queue {e['queue']} (IRQ on CPU "
                     f"{e['irq_cpu']}), backlog CPU {e['cpu']}"
                     + (f", SO_REUSEPORT socket {e['socket']} (thread on CPU "
                        f"{e['thread_cpu']})" if e["socket"] >= 0 else ", no socket"))
    return f, facts


def _ring_full(sub: Subject, dev: str, top: int) -> list[dict]:
    out = []
    for q in sub.data["queues"]:
        n = q["ring_full_drops"]
        if not n:
            continue
        qi, c = q["queue"], q["irq_cpu"]
        roles = cpu_roles(sub, c)
        facts = [f"rx queue {qi} dropped {n:,} of {q['packets'] + n:,} packets "
                 f"({pct(n / (q['packets'] + n))}): the ring was full, its NAPI poll on "
                 f"CPU {c} did not keep up", describe_cpu(sub, c)]
        mask = sub.flows.rxq == qi if sub.flows is not None else None
        f, ff = _flow_facts(sub, mask, top, f"queue {qi}")
        facts += ff
        sets = []
        e = f and f["elephant"]
        if e:
            other = least_loaded_queue(sub, qi)
            sets.append(setting(tuple_rule(sub, e, dev, other),
                                f"gives the elephant flow a queue of its own choosing (queue "
                                f"{other} has the fewest packets): RSS keeps every packet of "
                                f"a flow in one bucket ({e['rss_bucket']}), so no table "
                                "change splits it"))
        if roles["saturated"]:
            if roles["threads"]:
                sets.append(setting(
                    f"taskset -pc <cpus> <tid>  (apps[].cpus without CPU {c})",
                    f"the application threads on CPU {c} take "
                    f"{pct(roles['util']['user'] + roles['util']['system'])} of it from the "
                    "poll"))
            spare = spare_cpus(sub, {c})
            if rps_masks(sub)[qi] == "0" and spare:
                sets.append(setting(
                    f"echo {mask_of(spare)} > /sys/class/net/{dev}/queues/rx-{qi}/rps_cpus",
                    f"RPS moves protocol work of queue {qi} off CPU {c} to CPUs that take "
                    "no rx IRQ (each flow to one of them)"))
            sets.append(setting(
                f"ethtool -X {dev} weight ...  (lower queue {qi}'s weight)",
                f"fewer RSS buckets on queue {qi}, so less of the traffic reaches CPU {c}"))
            sets.append(setting(f"ethtool -L {dev} combined N{now(sub, 'queues')}",
                                "more queues, each with its own IRQ CPU"))
            sets.append(setting(f"echo <cpu> > /proc/irq/<IRQ of rx-{qi}>/smp_affinity_list",
                                f"moves queue {qi}'s interrupt and poll to a less busy CPU"))
        else:
            facts.append(f"CPU {c} is not saturated ({pct(roles['util']['idle'])} idle): "
                         "the ring overflows in bursts faster than one poll interval")
        sets.append(setting(f"ethtool -G {dev} rx N{now(sub, 'ring_size')}",
                            "a longer ring absorbs bursts (more queueing delay, no more "
                            "capacity)"))
        out.append({"reason": "ring_full", "where": f"rx queue {qi}", "packets": n,
                    "title": f"ring_full on rx queue {qi} (IRQ CPU {c}): {n:,}",
                    "facts": facts, "flows": f, "elephant": e or None, "settings": sets})
    return out


def _backlog(sub: Subject, dev: str, top: int) -> list[dict]:
    d = sub.data
    by = d["packets"]["dropped_by_reason"]
    out = []
    for row in d["cpus"]:
        c, sn = row["cpu"], row["softnet_stat"]
        n = sn["dropped"]
        if not n:
            continue
        roles = cpu_roles(sub, c)
        facts = [f"CPU {c}'s backlog (input_pkt_queue) dropped {n:,} packets (softnet_stat "
                 "'dropped', which counts backlog overflow and flow-limit drops alike; on all "
                 f"CPUs: {by.get('backlog', 0):,} backlog, {by.get('flow_limit', 0):,} flow "
                 "limit)",
                 describe_cpu(sub, c)]
        f, bmask = None, None
        if sub.flows is not None:
            bmask = (sub.flows.cpu == c) & sub.flows.via_backlog
            f, ff = _flow_facts(sub, bmask, top, f"CPU {c}'s backlog")
            facts += ff
            src = sorted({int(q) for q in sub.flows.rxq[bmask]})
            if src:
                facts.append(f"its packets come from rx queue(s) {', '.join(map(str, src))}")
        e = f and f["elephant"]
        sets = [setting(f"sysctl -w net.core.netdev_max_backlog=N"
                        f"{now(sub, 'netdev_max_backlog')}",
                        "a longer backlog absorbs bursts; it adds no capacity to CPU "
                        f"{c}")]
        if e:
            enq = [e["irq_cpu"]]  # skb_flow_limit() keeps its table on the enqueuing CPU
            fl_now = sub.now.get("flow_limit_cpu_bitmap")
            if not fl_now or fl_now == "0" or e["irq_cpu"] not in _mask_cpus(fl_now):
                sets.append(setting(
                    f"sysctl -w net.core.flow_limit_cpu_bitmap={mask_of(enq)}"
                    f"{now(sub, 'flow_limit_cpu_bitmap')}",
                    f"flow limit on CPU {e['irq_cpu']}, which enqueues the elephant, drops its "
                    "excess first and keeps the other flows' packets"))
            sets.append(setting(tuple_rule(sub, e, dev, least_loaded_queue(sub, e["queue"])),
                                "moves the elephant to another queue (and with RPS, "
                                "another backlog CPU)"))
        if roles["saturated"] or e:
            spare = [x for x in spare_cpus(sub, {c})]
            qs = sorted({int(q) for q in sub.flows.rxq[bmask]}) if (
                bmask is not None) else roles["rps_from_queues"]
            if spare and qs:
                sets.append(setting(
                    f"echo {mask_of(spare)} > /sys/class/net/{dev}/queues/rx-{qs[0]}/rps_cpus"
                    + (f"  (and rx-{qs[-1]}...)" if len(qs) > 1 else ""),
                    f"spreads the backlog work over CPUs that take no rx IRQ, not CPU {c}"))
            if roles["threads"]:
                sets.append(setting(
                    f"taskset -pc <cpus> <tid>  (apps[].cpus without CPU {c})",
                    f"application threads on CPU {c} take "
                    f"{pct(roles['util']['user'] + roles['util']['system'])} of it"))
        kind = "backlog" if by.get("backlog") else "flow-limit"
        out.append({"reason": "backlog", "where": f"CPU {c}", "packets": n,
                    "title": f"{kind} drops on CPU {c}: {n:,}", "facts": facts, "flows": f,
                    "elephant": e or None, "settings": sets})
    return out


def _mask_cpus(m: str) -> list[int]:
    from rxlab.cpuset import parse_mask

    return parse_mask(m)


def _flow_limit(sub: Subject, dev: str, top: int) -> list[dict]:
    out = []
    cfg = sub.data["config"]
    for row in sub.data["cpus"]:
        c, n = row["cpu"], row["softnet_stat"]["flow_limit_count"]
        if not n:
            continue
        facts = [f"flow limit on CPU {c} (in net.core.flow_limit_cpu_bitmap) dropped {n:,} "
                 "packets it enqueued to a backlog more than half full "
                 f"(over netdev_max_backlog/2): a flow holding more than half of the last "
                 f"{cfg.get('flow_limit_history', 128)} packets loses its excess"]
        f = None
        if sub.flows is not None:
            fl = sub.flows
            mask = (fl.irq_cpu == c) & fl.via_backlog  # skb_flow_limit() runs on the enqueuer
            f, ff = _flow_facts(sub, mask, top, f"the backlogs CPU {c} enqueues to")
            facts += ff
            e = f["elephant"]
            if e is None and f["top"]:
                e = f["top"][0]
            if e:
                i = e["index"]
                same = int(((fl.fl_bucket == fl.fl_bucket[i]) & mask).sum()) - 1
                if same:
                    facts.append(f"{same:,} other flow(s) share its flow-limit bucket "
                                 f"{int(fl.fl_bucket[i])} of {cfg.get('flow_limit_table_len')}"
                                 " and count against the same limit")
        sets = [setting(f"sysctl -w net.core.flow_limit_cpu_bitmap=<mask without CPU {c}>"
                        f"{now(sub, 'flow_limit_cpu_bitmap')}",
                        "turns flow limit off there: the elephant's packets reach the "
                        "backlog again (and may overflow it for every flow)"),
                setting(f"sysctl -w net.core.netdev_max_backlog=N"
                        f"{now(sub, 'netdev_max_backlog')}",
                        "flow limit acts only above half of it"),
                setting(f"sysctl -w net.core.flow_limit_table_len=N"
                        f"{now(sub, 'flow_limit_table_len')}",
                        "fewer flows share a bucket; read only when flow_limit_cpu_bitmap is "
                        "written next")]
        out.append({"reason": "flow_limit", "where": f"CPU {c}", "packets": n,
                    "title": f"flow_limit on CPU {c}: {n:,}", "facts": facts, "flows": f,
                    "elephant": f and f["elephant"] or None, "settings": sets})
    return out


def _inline_softirq(sub: Subject, t: int) -> str | None:
    """The reader's CPU time went on receive work inside its own recv() (the result's
    ``tasks``, rxlab.metrics.tasks), or None when most of it did not."""
    task = next((x for x in sub.data.get("tasks", []) if x["kind"] == "app"
                 and x["task"].endswith(f"/{t}")), None)
    if not task or not task["cpu_s"] or task["softirq_s"] < 0.5 * task["cpu_s"]:
        return None
    return (f"the thread spent {pct(task['softirq_s'] / task['cpu_s'])} of its CPU time on "
            f"receive work in its own recv(): each datagram's spin_unlock_bh() runs CPU "
            f"{task['cpu']}'s pending NET_RX softirq inline (kernel/softirq.c "
            "__local_bh_enable_ip; 6.5+ and up to 4.8), so it reads one datagram per run")


def _socket(sub: Subject, dev: str, top: int) -> list[dict]:
    """Per socket, its sk_drops: the receive buffer was full (``socket_rcvbuf``) or, for
    TCP, the reader owned the socket and its backlog was over tcp_add_backlog()'s limit
    (``socket_backlog``). The kernel counts both in sk_drops; only the host-wide totals
    (TCPBacklogDrop in /proc/net/netstat) tell them apart, so both are given."""
    out = []
    d = sub.data
    by = d["packets"]["dropped_by_reason"]
    n_rcv, n_bl = by.get("socket_rcvbuf", 0), by.get("socket_backlog", 0)
    reason = "socket_backlog" if n_bl > n_rcv else "socket_rcvbuf"
    for t, a in enumerate(d["apps"]):
        n = a["socket_drops"]
        if not n:
            continue
        c = a["cpu"]
        roles = cpu_roles(sub, c)
        size = f"{sub.now['rcvbuf'][t]:,} bytes" if "rcvbuf" in sub.now else ""
        if n_bl:
            facts = [f"socket {t} ({a['app']}, read by the thread on CPU {c}) dropped {n:,} "
                     f"packets (sk_drops; on the host {n_bl:,} socket_backlog and {n_rcv:,} "
                     f"socket_rcvbuf); the thread read {a['served']:,}",
                     "socket_backlog: the segment met a socket its reader owned (it holds "
                     "the socket lock while recvmsg copies), so tcp_v4_rcv() queued it to "
                     "the socket backlog, and tcp_add_backlog() dropped it because the "
                     "backlog and the receive queue held more than 2 x sk_rcvbuf"
                     f"{f' ({size})' if size else ''} + sk_sndbuf/2 + 64 KB "
                     "(net/ipv4/tcp_ipv4.c, v6.10+); "
                     "release_sock() processes the backlog only when the read ends",
                     describe_cpu(sub, c)]
        else:
            facts = [f"socket {t} ({a['app']}, read by the thread on CPU {c}) dropped {n:,} "
                     f"packets: its receive buffer (sk_rcvbuf{', ' + size if size else ''}) was "
                     "full; the thread "
                     f"read {a['served']:,}", describe_cpu(sub, c)]
        f, e, sets = None, None, []
        inline = _inline_softirq(sub, t)
        if inline is not None:
            facts.append(inline)
            if roles["irq_queues"] and not d["config"].get("threaded"):
                sets.append(setting(
                    f"echo 1 > /sys/class/net/{dev}/threaded  (nic.threaded: true, 5.12+)",
                    f"the NAPI polls of queue(s) {', '.join(map(str, roles['irq_queues']))} "
                    "run in kthreads napi/DEV-ID, scheduled tasks beside the reader: its "
                    "recv() no longer runs them (pin them with taskset, "
                    "Documentation/networking/napi.rst)"))
        if sub.flows is not None:
            f, ff = _flow_facts(sub, sub.flows.sock == t, top, f"socket {t}")
            facts += ff
            e = f["elephant"]
        if e and (sub.now.get("spread") or ["hash"])[t] == "hash":
            facts.append("SO_REUSEPORT picks a socket by a hash of the flow's addresses and "
                         "ports (reuseport_select_sock(), net/core/sock_reuseport.c): the "
                         f"elephant stays on socket {t} however many sockets there are")
            sets.append(setting("setsockopt(SO_ATTACH_REUSEPORT_EBPF)",
                                "a reuseport BPF program may choose the socket per packet "
                                "(a stateless UDP request protocol allows it) and spread the "
                                "elephant over threads"))
        if e and sub.flows.via_backlog[e["index"]] and e["cpu"] == c:
            q = e["queue"]
            rest = [x for x in range(len(sub.data["cpus"]))
                    if x != c and x in _mask_cpus(rps_masks(sub)[q])]
            facts.append(f"RPS puts the elephant's protocol work on CPU {c}, where its reader "
                         "runs: softirq there comes first and the reader falls behind")
            if rest:
                sets.append(setting(
                    f"echo {mask_of(rest)} > /sys/class/net/{dev}/queues/rx-{q}/rps_cpus",
                    f"queue {q}'s RPS map without CPU {c}: the elephant's softirq moves off "
                    "its reader's CPU"))
        sets += [setting(f"setsockopt(SO_RCVBUF) / apps[].rcvbuf{now(sub, 'rcvbuf', t)}",
                        "a larger buffer absorbs the reader's pauses"),
                setting("sysctl -w net.core.rmem_max=N",
                        "SO_RCVBUF is capped at rmem_max (rmem_default when the app sets "
                        "none: sysctl -w net.core.rmem_default=N)")]
        if roles["util"]["softirq"] + roles["util"]["irq"] > 0.1:
            sets.append(setting(f"taskset -pc <cpus> <tid>  (apps[].cpus without CPU {c})",
                                f"the reader shares CPU {c} with "
                                f"{pct(roles['util']['softirq'] + roles['util']['irq'])} "
                                "of softirq/IRQ work, which runs first"))
        if n_bl:
            sets.insert(0, setting(f"smaller reads / apps[].batch{now(sub, 'batch', t)}",
                                   "the reader owns the socket for its whole recvmsg copy: "
                                   "fewer bytes per read release it (and run the backlog) "
                                   "sooner; the limit also grows with SO_RCVBUF"))
        else:
            sets.append(setting(f"{batched_reads(sub, t)} / apps[].batch{now(sub, 'batch', t)}",
                                "more packets per wake-up, fewer wake-ups"))
        out.append({"reason": reason, "where": f"socket {t}", "packets": n,
                    "title": f"{reason} on socket {t} (thread on CPU {c}): {n:,}",
                    "facts": facts, "flows": f, "elephant": e, "settings": sets})
    return out


def _no_socket(sub: Subject, top: int) -> dict:
    n = sub.data["packets"]["dropped_by_reason"]["no_socket"]
    facts = ["no socket listens for these flows (UdpNoPorts / TCP RST)"]
    f = None
    if sub.flows is not None:
        f, ff = _flow_facts(sub, sub.flows.sock < 0, top, "no socket")
        facts += ff
        groups = sorted({str(g) for g in sub.flows.group[sub.flows.sock < 0]})
        facts.append(f"traffic group(s) without a reader: {', '.join(groups)}")
    return {"reason": "no_socket", "where": "no socket", "packets": n,
            "title": f"no_socket: {n:,}", "facts": facts, "flows": f, "elephant": None,
            "settings": [setting("apps[].groups", "give these groups a reading application")]}


def squeeze(sub: Subject) -> list[dict]:
    """Per CPU with softirq work: why time_squeeze is or is not counted."""
    d = sub.data
    cfg = d["config"]
    usecs, hz = cfg.get("netdev_budget_usecs"), cfg.get("hz")
    budget = sub.now.get("netdev_budget")
    out = []
    for row in d["cpus"]:
        c, sn, u = row["cpu"], row["softnet_stat"], row["util"]
        irq = any(q["irq_cpu"] == c for q in d["queues"])
        if not (sn["processed"] or sn["dropped"] or sn["time_squeeze"] or irq):
            continue
        ts = sn["time_squeeze"]
        lim = (f"netdev_budget{f' ({budget} packets)' if budget else ''} or "
               f"netdev_budget_usecs ({usecs} us, {cfg.get('budget_jiffies')} jiffies at "
               f"HZ={hz})")
        if ts:
            why = (f"net_rx_action stopped {ts:,} times with polls left, at {lim}: more "
                   "work arrived than one softirq run may do")
            sets = [setting("sysctl -w net.core.netdev_budget=N / netdev_budget_usecs=N",
                            "longer softirq runs (latency for the CPU's threads, no more "
                            "capacity)")]
        else:
            # time_squeeze counts runs cut short; 0 says no more than that: a CPU busy
            # in softirq back to back (ksoftirqd) ends every run and still drops
            why = (f"0: no net_rx_action run stopped at {lim} with polls left"
                   + _saturated(c, u)
                   + (f"; CPU {c} dropped {sn['dropped']:,} in its backlog: the backlog "
                      "filled between runs (RPS producers outpace it in bursts), not "
                      "because a run was cut short" if sn["dropped"] else ""))
            sets = []
        out.append({"cpu": c, "time_squeeze": ts, "softirq": u["softirq"], "why": why,
                    "settings": sets})
    return out


SATURATED = 0.9  # softirq share of a CPU above which its runs follow one another


def _saturated(c: int, u: dict) -> str:
    """What a time_squeeze of 0 means on a CPU that softirq keeps busy."""
    if u["softirq"] < SATURATED:
        return ""
    return (f"; yet CPU {c} spends {pct(u['softirq'])} of its time in softirq "
            f"({pct(u.get('ksoftirqd', 0.0))} in ksoftirqd): each run ends, the next "
            "follows at once, so the CPU's speed, not the budget, limits it")
