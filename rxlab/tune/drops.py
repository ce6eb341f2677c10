"""Where a run drops packets, and which settings could move it.

Drops are summed over every run (seed); the reasons that hold at least ``SHARE`` of them
are addressed, the dominant one first:

* ``ring_full`` (the rx descriptor ring of a queue is full when the NIC writes a packet:
  its IRQ CPU does not poll fast enough): a longer ring (``ethtool -G DEV rx N``, up to
  the driver's maximum), rx interrupts spread over distinct CPUs when queues share one
  (``/proc/irq/N/smp_affinity_list``), more queues (``ethtool -L DEV combined N``) when
  there are fewer queues than CPUs. One flow always hashes to one queue: neither more
  queues nor another IRQ spread splits an elephant flow.
* ``backlog`` (``enqueue_to_backlog``: a CPU's input_pkt_queue holds
  ``netdev_max_backlog`` packets): flow limit on the enqueuing CPUs when an elephant flow
  or an antagonist group is present, and a longer backlog.
* ``socket_rcvbuf`` (``__udp_enqueue_schedule_skb``: the socket's receive buffer is
  full): a larger ``SO_RCVBUF`` (capped by ``net.core.rmem_max``); and where a reader
  shares its CPU with receive work (that CPU takes an rx interrupt or is an RPS target),
  the three ways out of it (``shared_cpu``): the application on CPUs that do no receive
  work, RPS off the application's CPUs, or threaded NAPI (5.12+), whose kthreads the
  reader's recv() does not run.

Every candidate is simulated on every run by the caller; flow limit is recommended only
when it drops something there.
"""

from __future__ import annotations

from rxlab.cpuset import format_mask

SHARE = 0.10
RING_MAX_DEFAULT = 4096
RCVBUF_MAX = (1 << 31) - 2


def ring_max(driver: str) -> tuple[int, str]:
    """The driver's ``ethtool -g`` RX maximum from its preset (rxlab.drivers, each value
    cited there); the generic preset has only the schema's cap, so 4096 is assumed."""
    from rxlab.drivers import DRIVERS, load

    if driver in DRIVERS and driver != "generic":
        return int(load(driver).ring_max.value), f"the {driver} driver's maximum"
    return RING_MAX_DEFAULT, ("4096, the usual maximum (`ethtool -g DEV` prints this "
                              "driver's)")


def summarise(runs: list[dict], labels: list[str]) -> dict:
    """Drops by reason over all runs, the dominant reason, and per run the heaviest flow
    with its queue, IRQ CPU, consumer CPU and its queue's ring_full drops."""
    by: dict[str, int] = {}
    for d in runs:
        for k, v in d["packets"]["dropped_by_reason"].items():
            if v:
                by[k] = by.get(k, 0) + int(v)
    total = sum(by.values())
    order = sorted(by, key=lambda k: -by[k])
    per_run = []
    for lab, d in zip(labels, runs, strict=True):
        ele = d["tune"]["elephants"]
        e = dict(ele[0]) if ele else None
        ring = {q["queue"]: q["ring_full_drops"] for q in d["queues"]}
        if e is not None:
            e["queue_ring_full_drops"] = int(ring.get(e["queue"], 0))
        per_run.append({"run": lab, "elephant": e, "ring_full_drops": int(sum(ring.values())),
                        "ring_full_by_queue": {int(q): int(v) for q, v in ring.items() if v}})
    return {"by_reason": {k: by[k] for k in order}, "total": total,
            "dominant": order[0] if order else None,
            "addressed": [k for k in order if by[k] >= SHARE * total],
            "runs": per_run}


def bottleneck(s: dict) -> str | None:
    """One sentence naming the dominant reason, the elephant flow and where it lands."""
    dom = s["dominant"]
    if dom is None:
        return None
    runs = [r for r in s["runs"] if r["elephant"]]
    head = f"{dom}: {s['by_reason'][dom]:,} of {s['total']:,} drops over {len(s['runs'])} runs"
    if not runs:
        return head
    r = max(runs, key=lambda x: x["elephant"]["offered"] - x["elephant"]["delivered"])
    e = r["elephant"]
    lost = e["offered"] - e["delivered"]
    where = (f"{e['five_tuple']} ({e['share_of_traffic']:.1%} of all packets, "
             f"{e['share_of_queue']:.0%} of queue {e['queue']}, IRQ on CPU {e['irq_cpu']}, "
             f"read by the thread on CPU {e['thread_cpu']})")
    if dom == "ring_full":
        hit = sum(1 for x in runs if x["ring_full_drops"] and
                  x["elephant"]["queue_ring_full_drops"] >= 0.5 * x["ring_full_drops"])
        r = max(runs, key=lambda x: x["elephant"]["queue_ring_full_drops"])
        e = r["elephant"]
        return (f"{head}. The bottleneck is the rx ring of the queue that carries the elephant "
                f"flow: in {hit} of {len(runs)} runs at least half of the ring_full drops are "
                f"on its queue; e.g. {r['run']}: {e['five_tuple']} sends "
                f"{e['share_of_traffic']:.1%} of all packets ({e['share_of_queue']:.0%} of "
                f"queue {e['queue']}, IRQ on CPU {e['irq_cpu']}, read by the thread on CPU "
                f"{e['thread_cpu']}); its queue has {e['queue_ring_full_drops']:,} of the "
                f"run's {r['ring_full_drops']:,} ring_full drops")
    if dom == "socket_rcvbuf":
        return (f"{head}. The bottleneck is the receive buffer of the socket that "
                f"SO_REUSEPORT gives the elephant flow, read by one thread; e.g. {r['run']}: "
                f"{where} loses {lost:,} of its {e['offered']:,} packets")
    return f"{head}. Elephant flow, e.g. {r['run']}: {where}, {lost:,} of its packets dropped"


def candidates(sc, m, s: dict, *, antagonist: str | None,
               real: bool = False) -> tuple[dict, list[str]]:
    """{name: {"overrides", "what", "family"}} for the addressed reasons, and a sentence
    for each reason that no setting here moves."""
    out: dict[str, dict] = {}
    said: list[str] = []
    nq, ncpu = sc.nic.queues, sc.host.cpus
    irq = [int(c) for c in m.params.queue["irq_cpu"]]
    has_elephant = any(r["elephant"] and r["elephant"]["share_of_queue"] >= 0.25
                       for r in s["runs"])
    for reason in s["addressed"]:
        if reason == "ring_full":
            top, why = ring_max(sc.nic.driver)
            size = sc.nic.ring_size
            steps = sorted({min(top, size * 2), min(top, size * 4), top} - {size})
            for n in (x for x in steps if x > size):
                out[f"ring {n}"] = {"overrides": {"nic.ring_size": n}, "family": "ring",
                                    "what": f"rx ring {size} -> {n} descriptors (max {why})"}
            if size >= top:
                said.append(f"ring_full: the ring is already at {why} ({top})")
            if len(set(irq)) < min(nq, ncpu):
                spread = list(range(nq)) if nq <= ncpu else [q % ncpu for q in range(nq)]
                out["irq spread"] = {"overrides": {"nic.irq_affinity": spread},
                                     "family": "irq",
                                     "what": "one rx interrupt per CPU (queues share CPUs "
                                             "now)"}
            if nq < ncpu:
                n = min(ncpu, nq * 2)
                out[f"queues {n}"] = {"overrides": {"nic.queues": n, "nic.irq_affinity": None},
                                      "family": "queues",
                                      "what": f"{nq} -> {n} rx queues, IRQs 1:1 on CPUs "
                                              f"0-{n - 1}"}
            if has_elephant:
                said.append("ring_full: an elephant flow hashes to one queue whatever the "
                            "number of queues or the IRQ spread; only a longer ring absorbs "
                            "its bursts, or moving its work off that CPU")
        elif reason == "backlog":
            if has_elephant or antagonist:
                cpus = sorted(set(irq))
                ov = {"kernel.flow_limit_cpu_bitmap": format_mask(cpus)}
                if antagonist and real:  # known hashes: keep victims out of its buckets
                    tl = _table_len(sc, m, antagonist)
                    if tl != sc.kernel.flow_limit_table_len:
                        ov["kernel.flow_limit_table_len"] = tl
                out["flow limit"] = {"overrides": ov,
                                     "family": "flow_limit",
                                     "what": "flow limit on the CPUs that enqueue to the "
                                             "backlog (the IRQ CPUs): the elephant flow's "
                                             "packets are dropped first when a backlog is "
                                             "over half full"}
            b = sc.kernel.netdev_max_backlog
            for k in (2, 4, 8):
                out[f"backlog {b * k}"] = {"overrides": {"kernel.netdev_max_backlog": b * k},
                                           "family": "backlog",
                                           "what": f"netdev_max_backlog {b} -> {b * k}"}
        elif reason == "socket_rcvbuf":
            ov = {f"apps.{i}.rcvbuf": min(RCVBUF_MAX, a.rcvbuf * 4)
                  for i, a in enumerate(sc.apps) if a.afxdp is None}
            if ov:
                out["rcvbuf x4"] = {"overrides": ov, "family": "rcvbuf",
                                    "what": "SO_RCVBUF x4 for every application socket "
                                            "(net.core.rmem_max must allow it)"}
            out.update(shared_cpu(sc, m))
        elif reason == "flow_limit":
            said.append("flow_limit: flow limit is on and drops the heaviest flows' packets "
                        "first, which is its purpose")
        elif reason == "nic_overrun":
            said.append("nic_overrun: the NIC's own packet-rate ceiling (nic.max_pps); no "
                        "host setting moves it")
        else:
            said.append(f"{reason}: no setting rxlab tune searches moves these drops")
    return out, said


def receive_cpus(sc, m) -> tuple[set[int], set[int]]:
    """(CPUs that take an rx interrupt, CPUs some queue's RPS map sends packets to)."""
    p = m.params
    irq = {int(c) for c in p.queue["irq_cpu"]}
    rps = {int(p.rps_map[q, k]) for q in range(p.nq) for k in range(int(p.queue[q]["rps_len"]))}
    return irq, rps


def shared_cpu(sc, m) -> dict:
    """Candidates for applications whose threads share a CPU with receive work: each
    app's threads moved to CPUs that do none, RPS without the apps' CPUs, and threaded
    NAPI where an app CPU takes an rx interrupt (the NAPI poll there is then a scheduled
    kthread; its RPS backlog work, if any, stays softirq)."""
    from rxlab.kernel.versions import behaviour

    out: dict = {}
    irq, rps = receive_cpus(sc, m)
    busy = irq | rps
    apps = [(i, a.cpu_list()) for i, a in enumerate(sc.apps) if a.afxdp is None]
    shared = [(i, cpus) for i, cpus in apps if busy & set(cpus)]
    if not shared:
        return out
    app_cpus = {c for _, cpus in apps for c in cpus}
    free = [c for c in range(sc.host.cpus) if c not in busy]
    ov = {}
    for i, cpus in shared:
        if len(free) >= len(cpus):
            ov[f"apps.{i}.cpus"] = free[:len(cpus)]
            free = free[len(cpus):]
    if ov:
        out["apps off receive cpus"] = {
            "overrides": ov, "family": "shared_cpu",
            "what": "application threads on CPUs that take no rx interrupt and no RPS work"}
    if rps & app_cpus and rps - app_cpus:
        out["rps off app cpus"] = {
            "overrides": {"kernel.rps_cpus": format_mask(sorted(rps - app_cpus))},
            "family": "shared_cpu",
            "what": "RPS to its CPUs without the applications' (protocol work off the "
                    "readers' CPUs)"}
    if (irq & app_cpus and not sc.nic.threaded and sc.nic.rx_mode == "napi"
            and behaviour(sc.host.kernel).napi_threaded):
        out["threaded napi"] = {
            "overrides": {"nic.threaded": True}, "family": "shared_cpu",
            "what": "threaded NAPI: the polls run in kthreads napi/DEV-ID, scheduled beside "
                    "the reader instead of in its recv()'s softirq"}
    return out


def _table_len(sc, m, antagonist: str) -> int:
    from rxlab.build import flow_steering
    from rxlab.kernel.versions import behaviour
    from rxlab.tune.backlog import table_len_for

    fl = m.flows
    is_ant = fl.group == fl.group_names.index(antagonist)
    return table_len_for(flow_steering(sc, fl)["skb_hash"], is_ant, fl.rate_pps,
                         sc.kernel.flow_limit_table_len,
                         behaviour(sc.host.kernel).flow_limit_hash_32)["flow_limit_table_len"]
