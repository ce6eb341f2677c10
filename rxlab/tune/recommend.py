"""``tune(scenario)``: recommendations for a host, each held against several traffic seeds.

Every setting is simulated on ``seeds`` traffic seeds (5 by default, at least 5) and, when
real flows are given (``--pcap``, or a scenario that replays a capture), on the capture
replayed as captured (``rxlab.tune.runs``). A setting is recommended only when it improves
the objective on **every** run; each is reported with its per-run figures and spread, and
with what it makes worse (p99, any group's drop rate, the elephant flow's drops).

1. **Indirection table**, only with real flows: a table is a plan for the RSS hashes of
   known addresses. With synthetic flows the addresses, hence the hashes and which bucket
   holds the elephant flow, are random draws of the seed: a table fitted to one draw is
   not advice, so none is printed. With real flows: RSS++'s greedy migration (baseline),
   ours and the best ``ethtool -X weight`` table (``balance``), each validated.
2. **Steering**: whether RPS, RFS and aRFS help (``rfs.verdicts``); a setting already in
   place is reported as such, never as a change. RFS tables are sized only for flows
   whose socket records its CPU (TCP, connected UDP), within a memory limit, with their
   cost in bytes.
3. **Drops** (``drops``): the runs' drop reasons, the dominant one named with the
   elephant flow and the queue/CPU it lands on, and the settings that address it (ring
   size, IRQ spread, queues, flow limit, backlog, socket buffer), each simulated.
4. **Latency** (``latency``, for ``--objective latency``): interrupt moderation below the
   current rx-usecs, and the application's threads off the CPUs that do receive work.

Every kind searched is reported with the settings tried or why none was (``searched``).
A setting that improves the objective but worsens another past its bound is not
recommended (``trade_refused``: p99 +10 % for drops or balance unless
``--accept-latency``; any added drop for latency).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rxlab.errors import UsageError
from rxlab.scenario import Scenario, with_overrides
from rxlab.stats import paired_difference
from rxlab.tune import backlog, balance, drops, latency, rfs
from rxlab.tune.runs import CAPTURE, Runner

OBJECTIVES = ("balance", "latency", "drops")
TABLES = ("rsspp", "rsspp_best_run", "ours", "ours_weight")
TIE = 0.002  # relative: simulated differences below this are ties
# a setting recommended for drops or balance may raise the mean p99 by at most this much
# (``--accept-latency`` lifts it); one recommended for latency may not raise drops
LATENCY_BOUND = 0.10
WORSE = TIE  # relative rise of p99 or a drop rate that is reported as a cost
MIN_SEEDS = 5


def sim_metrics(d: dict, cpus, antagonist: str | None = None) -> dict:
    """Figures of one simulated run: loads over ``cpus`` (all CPUs too), p99 to the
    application, drops, each group's drop rate, and the victims' drop rate (the groups
    other than ``antagonist``; without one, every flow but the elephant flows)."""
    busy = np.array([1.0 - c["util"]["idle"] for c in d["cpus"]])
    sel = busy[list(cpus)] if len(cpus) else busy
    lat = d["latency_ns"]
    p99 = lat["to_app"]["p99"] if lat["to_app"]["samples"] else lat["to_socket"]["p99"]
    pk = d["packets"]
    mean = float(sel.mean())
    groups = {g: round((v["offered"] - v["delivered"]) / v["offered"], 6) if v["offered"]
              else 0.0 for g, v in d["flows_by_group"].items()}
    if antagonist is not None:
        victim = round(backlog.group_loss(
            d, [g for g in d["flows_by_group"] if g != antagonist])["drop_rate"], 6)
    else:
        t = d["tune"]
        victim = round(1 - t["victim_delivered"] / t["victim_offered"], 6) \
            if t["victim_offered"] else 0.0
    ele = d["tune"]["elephants"]
    return {
        "max_load": round(float(sel.max()), 4),
        "max_load_all": round(float(busy.max()), 4),
        "mean_load": round(mean, 4),
        "cpus_busy": round(float(busy.sum()), 4),  # CPUs' worth of time, all CPUs
        "imbalance": round(float(sel.max()) / mean, 4) if mean > 0 else 1.0,
        "p99_ns": float(p99 or 0.0),
        "drops": int(pk["dropped"]),
        "drop_rate": round(pk["dropped"] / pk["offered"], 6) if pk["offered"] else 0.0,
        "delivered": int(pk["delivered"]),
        "drops_by_reason": {k: int(v) for k, v in pk["dropped_by_reason"].items() if v},
        "group_drop_rate": groups,
        "victim_drop_rate": victim,
        "elephant_drops": int(ele[0]["offered"] - ele[0]["delivered"]) if ele else 0,
    }


KEY = {"balance": "imbalance", "latency": "p99_ns", "drops": "victim_drop_rate"}


def verdict(base: list[dict], cand: list[dict], key: str) -> dict:
    """Per-run comparison on ``key`` (lower is better): improves on every run?"""
    b = [r[key] for r in base]
    c = [r[key] for r in cand]
    better = [y < x * (1 - TIE) - 1e-12 for x, y in zip(b, c, strict=True)]
    neutral = [x == 0 and y == 0 for x, y in zip(b, c, strict=True)]
    wins = sum(better)
    return {"metric": key, "before": b, "after": c,
            "mean_before": float(np.mean(b)), "mean_after": float(np.mean(c)),
            "min_after": float(np.min(c)), "max_after": float(np.max(c)),
            "wins": wins, "runs": len(b),
            "every_run": bool(wins and all(w or n for w, n in zip(better, neutral,
                                                                 strict=True)))}


def fmt_ns(ns: float) -> str:
    """Three significant figures, so that a change of 1 % shows (1.00 ms -> 1.01 ms)."""
    for scale, unit in ((1e6, "ms"), (1e3, "us")):
        if ns >= scale:
            v = ns / scale
            return f"{v:.{2 if v < 10 else 1 if v < 100 else 0}f} {unit}"
    return f"{ns:.0f} ns"


def costs(base: list[dict], cand: list[dict]) -> list[str]:
    """What a setting makes worse, with figures (means over the runs)."""
    out = []
    n = len(base)
    pb = float(np.mean([r["p99_ns"] for r in base]))
    pa = float(np.mean([r["p99_ns"] for r in cand]))
    if pa > pb * (1 + WORSE):
        worse = sum(c["p99_ns"] > b["p99_ns"] * (1 + TIE) for b, c in zip(base, cand,
                                                                            strict=True))
        out.append(f"raises p99 latency from {fmt_ns(pb)} to {fmt_ns(pa)} (+{pa / pb - 1:.1%}, "
                   f"mean of {n} runs; higher on {worse} of {n})")
    for g in base[0]["group_drop_rate"]:
        db = float(np.mean([r["group_drop_rate"][g] for r in base]))
        da = float(np.mean([r["group_drop_rate"][g] for r in cand]))
        if da > db * (1 + WORSE) and da - db > 1e-5:
            out.append(f"raises group {g}'s drop rate from {db:.3%} to {da:.3%} (mean of "
                       f"{n} runs)")
    eb = sum(r["elephant_drops"] for r in base)
    ea = sum(r["elephant_drops"] for r in cand)
    if ea > eb * (1 + WORSE) and ea - eb > 0:
        out.append(f"drops more of the elephant flow's packets: {eb:,} -> {ea:,} over {n} "
                   "runs")
    cb = [r["cpus_busy"] for r in base]
    ca = [r["cpus_busy"] for r in cand]
    if np.mean(ca) > np.mean(cb) * (1 + WORSE):
        iv = paired_difference(ca, cb)  # after - before, same seeds
        out.append(f"uses more CPU: {np.mean(cb):.3f} -> {np.mean(ca):.3f} CPUs busy (mean "
                   f"of {n} runs; +{iv.estimate:.3f} +- {iv.half:.3f}, paired 95 %)")
    return out


def _check(objective, collision_target, target_drops, antagonist, rounds, duration, seeds,
           form, jobs, sc):
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    if not 0 < collision_target < 1:
        raise UsageError(f"--collision-target {collision_target}: give a rate in (0, 1), "
                         "e.g. 0.02")
    if not 0 <= target_drops < 1:
        raise UsageError(f"--target-drops {target_drops}: give a rate in [0, 1), e.g. 0.001")
    if rounds < 1:
        raise UsageError(f"--rsspp-rounds {rounds}: give 1 or more")
    if duration is not None and not duration > 0:
        raise UsageError(f"--duration {duration}: must be > 0 seconds")
    if seeds < MIN_SEEDS:
        raise UsageError(f"--seeds {seeds}: give {MIN_SEEDS} or more (a recommendation must "
                         "hold on several traffic draws)")
    names = sc.traffic.group_names()
    if antagonist is not None and antagonist not in names:
        raise UsageError(f"--antagonist {antagonist!r}: no traffic group of that name "
                         f"(groups: {', '.join(names)})")
    size = sc.nic.rss.table_size
    if size & (size - 1):
        raise UsageError(f"nic.rss.table_size {size}: rxlab tune needs a power of two "
                         "(bucket = hash & (size - 1))")
    if form not in ("explicit", "weight"):
        raise UsageError(f"--form {form!r}: choose explicit or weight")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: give a number of processes >= 1")


def with_capture(sc: Scenario, pcap: str) -> Scenario:
    """The scenario with its traffic replaced by the capture (every app reads it)."""
    p = Path(pcap)
    if not p.is_file():
        raise UsageError(f"--pcap {pcap}: no such file")
    apps = sc.model_dump(mode="python", exclude_none=True)["apps"]
    named = [i for i, a in enumerate(apps) if a.get("groups", "all") != "all"]
    if len(named) > 1:
        raise UsageError(f"--pcap: apps[{named[1]}].groups names generated groups; with a "
                         "capture (one group, pcap) give one app or groups: all")
    for a in apps:
        a["groups"] = "all"
    return with_overrides(sc, {"traffic": {"pcap": {"file": str(p.resolve())}},
                               "apps": apps})


def fixed_flows(sc: Scenario) -> bool:
    """The groups name every flow's addresses, ports and rate (as ``rxlab host export
    --sockets`` writes them): the seed draws packet times only."""
    from rxlab.traffic.flows import build_flows

    a, b = build_flows(sc.traffic, 1), build_flows(sc.traffic, 2)
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in
               ("src_v4", "dst_v4", "src_v6", "dst_v6", "sport", "dport", "weight"))


def _same(sc: Scenario, overrides: dict) -> bool:
    """The overrides change nothing (a setting already in place)."""
    try:
        new = with_overrides(sc, overrides)
    except UsageError:
        return False
    return new.model_dump(exclude_none=True) == sc.model_dump(exclude_none=True)


def tune(
    sc: Scenario,
    *,
    objective: str = "balance",
    dev: str = "eth0",
    collision_target: float = 0.02,
    antagonist: str | None = None,
    target_drops: float = 0.001,
    rounds: int = 20,
    duration: float | None = None,
    form: str = "explicit",
    seeds: int = MIN_SEEDS,
    pcap: str | None = None,
    jobs: int = 1,
    accept_latency: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Recommendations, each validated on every run, as a JSON-able dict."""
    from rxlab.build import build
    from rxlab.kernel.versions import behaviour

    _check(objective, collision_target, target_drops, antagonist, rounds, duration, seeds,
           form, jobs, sc)
    if duration is not None:
        sc = with_overrides(sc, {"duration": duration})
    if pcap is not None:
        sc = with_capture(sc, pcap)
    real = sc.traffic.pcap is not None or fixed_flows(sc)
    kb = behaviour(sc.host.kernel)
    seed_list = [sc.seed + i for i in range(seeds)]
    runner = Runner(sc, seeds=seed_list, capture=sc.traffic.pcap is not None, jobs=jobs,
                    say=progress or (lambda msg: None))
    labels = runner.labels
    m = build(sc)
    irq_cpus, rps_now = _receive_cpus(m, sc.nic.queues)
    use_cpus = sorted(set(irq_cpus) | rps_now | {c for _, c in m.threads})
    key = KEY[objective]

    def metrics(runs: list[dict]) -> list[dict]:
        return [sim_metrics(d, use_cpus, antagonist) for d in runs]

    base_runs = runner.runs({"before": {}})["before"]
    base = metrics(base_runs)
    indir, table_cands = _indirection(sc, m, base_runs, labels, irq_cpus, real=real,
                                      rounds=rounds, form=form)
    sizes, ver, steer_cands = _steering(sc, m, base_runs[0], rps_now, kb, real=real,
                                        collision_target=collision_target)
    ds, drop_cands = _drops(sc, m, base_runs, labels, antagonist=antagonist, real=real)
    lat_cands, lat_said = (latency.candidates(sc, m) if objective == "latency"
                           else ({}, []))
    # name -> {"overrides", "what", "family", ...}
    cands = {**table_cands, **steer_cands, **drop_cands, **lat_cands}
    _validate(sc, runner, cands, base, key, metrics, accept_latency=accept_latency)
    notes: list[str] = []
    picks, final_ov, after = _recommend(runner, cands, base, key, metrics, notes)
    _steering_simulated(ver, cands, picks)
    if real:
        tab = [n for n in picks if cands[n]["family"] == "table"]
        indir["recommended"] = tab[0].split(" ", 1)[1] if tab else None
    report = {
        "scenario": sc.name, "seeds": seed_list, "runs": labels,
        "flows_source": ("capture" if sc.traffic.pcap is not None else
                         "fixed" if real else "synthetic"),
        "duration_s": sc.duration, "objective": objective, "metric": key, "device": dev,
        "kernel": sc.host.kernel, "flows": len(m.flows), "queues": sc.nic.queues,
        "cpus": sc.host.cpus, "indirection": indir, "rfs": sizes, "steering": ver,
        "drops": ds, "candidates": cands, "recommended": picks,
        "searched": searched(cands, indir, ver, ds, lat_said, objective),
        "cpus_in_use": list(use_cpus),
        **_outcome(labels, base, after, picks, key, target_drops),
        "overrides": final_ov, "notes": notes,
    }
    report["commands"] = commands(report, sc, dev)
    return report


def _receive_cpus(m, nq: int) -> tuple[list[int], set[int]]:
    """The CPUs that take rx interrupts (sorted), and those RPS steers to now."""
    irq = np.asarray(m.params.queue["irq_cpu"], np.int64)
    rps_now = set()
    for q in range(nq):
        rps_now |= set(np.asarray(m.params.rps_map[q][: m.params.queue[q]["rps_len"]]).tolist())
    return sorted(set(irq.tolist())), rps_now


def _indirection(sc, m, base_runs: list[dict], labels: list[str], irq_cpus: list[int], *,
                 real: bool, rounds: int, form: str) -> tuple[dict, dict[str, dict]]:
    """The indirection table section and its candidates (real flows only)."""
    from rxlab.build import flow_steering

    indir = {"table_size": sc.nic.rss.table_size, "queues": sc.nic.queues,
             "irq_cpus": irq_cpus, "planned": real}
    if not real:
        indir["why"] = (
            "the flows are synthetic with random addresses: their RSS hashes, and so which "
            "bucket holds the elephant flow, are a draw of the traffic seed and cannot be "
            "planned; a table fitted to one draw wins or loses at random on another. Give "
            "the real flows for a table (--pcap FILE, a capture of this traffic, or groups "
            "that fix every flow's addresses and ports, as rxlab host export --sockets "
            "writes them)")
        return indir, {}
    fit_run = base_runs[labels.index(CAPTURE)] if CAPTURE in labels else base_runs[0]
    indir.update(_tables(sc, m, m.flows, fit_run, rounds, form, flow_steering))
    return indir, _table_candidates(indir["candidates"], form)


def _table_candidates(tables: dict, form: str) -> dict[str, dict]:
    """A candidate for each table that moves buckets and differs from those before it;
    with ``form`` weight, only the tables ``ethtool -X weight`` can write."""
    cands: dict[str, dict] = {}
    for name in TABLES:
        c = tables.get(name)
        if c is None or c["same_table_as"] is not None or c["buckets_moved"] == 0:
            continue
        ov = ({"nic.rss.indirection": {"weight": c["ethtool"]["weight"]}}
              if form == "weight" and c["ethtool"] and "weight" in c["ethtool"]
              else {"nic.rss.indirection": c["table"]})
        if form == "weight" and not (c["ethtool"] and "weight" in c["ethtool"]):
            continue
        cands[f"table {name}"] = {"overrides": ov, "family": "table",
                                  "what": f"indirection table: {name}"}
    return cands


def _rfs_sizes(sc, m, steer: dict, kb, *, real: bool, collision_target: float) -> dict:
    """RFS table sizes for the flows whose socket records its CPU, or why none are."""
    fs = np.asarray(m.params.flow["flow_sock"], np.int64)
    rec_sock = np.asarray(m.so.sock["sock_record"], bool)
    record = np.array([bool(rec_sock[s]) if s >= 0 else False for s in fs])
    if not record.any():
        return {"offered": False, "flows": 0,
                "why": "no flow records its CPU: the sockets are unconnected UDP, and "
                       "recvmsg records a flow only for a TCP or connected UDP socket "
                       "(sock_rps_record_flow needs TCP_ESTABLISHED, include/net/rps.h), "
                       "so RFS tables would steer nothing"}
    sizes = rfs.size_tables(steer["skb_hash"][record], steer["rxq"][record].astype(
        np.int64), np.asarray(steer["table"], np.int64), sc.nic.queues, collision_target,
        kb, exact=real)
    sizes["offered"] = True
    return sizes


def _steering(sc, m, base_run: dict, rps_now: set[int], kb, *, real: bool,
              collision_target: float) -> tuple[dict, dict, dict[str, dict]]:
    """RFS sizes, the RPS/RFS/aRFS verdicts and the RPS and RFS candidates: RPS already
    on stays as configured, and is never offered as a change."""
    from rxlab.build import flow_steering

    sizes = _rfs_sizes(sc, m, flow_steering(sc, m.flows), kb, real=real,
                       collision_target=collision_target)
    ver = rfs.verdicts(base_run, sc, m, sizes)
    cands: dict[str, dict] = {}
    rv = ver["rps"]
    if rps_now and rv["verdict"] != "yes":
        rv["why"] += (f"; RPS is on now (CPUs {_cpulist(sorted(rps_now))}) and stays as "
                      "configured")
    if rv["verdict"] == "yes":
        if set(rv["spread_to"]) <= rps_now:
            rv["verdict"], rv["why"] = "in place", (
                f"RPS already spreads to CPUs {_cpulist(sorted(rps_now))}")
        else:
            cands["rps"] = {"overrides": {"kernel.rps_cpus": backlog.cpu_mask(
                rv["spread_to"])}, "family": "rps",
                "what": "RPS: protocol work to the CPUs without rx interrupts"}
    if (ver["rfs"]["verdict"] == "may help" and not ver["rfs"]["enabled"]
            and sizes.get("offered")):
        cands["rfs"] = {"overrides": {
            "kernel.rps_sock_flow_entries": sizes["rps_sock_flow_entries"],
            "kernel.rps_flow_cnt": sizes["rps_flow_cnt"]}, "family": "rfs",
            "what": "RFS tables sized for the recording flows"}
    return sizes, ver, cands


def _drops(sc, m, base_runs: list[dict], labels: list[str], *, antagonist: str | None,
           real: bool) -> tuple[dict, dict[str, dict]]:
    """The runs' drops with their bottleneck, and the candidates that address them."""
    ds = drops.summarise(base_runs, labels)
    ds["bottleneck"] = drops.bottleneck(ds)
    dc, ds["not_addressed"] = drops.candidates(sc, m, ds, antagonist=antagonist, real=real)
    return ds, dc


def _validate(sc, runner: Runner, cands: dict[str, dict], base: list[dict], key: str,
              metrics: Callable[[list[dict]], list[dict]], *,
              accept_latency: bool = False) -> None:
    """Simulate every candidate not already in place on every run, and record in it its
    per-run figures, verdict on ``key``, costs and whether to adopt it: not when it
    worsens another objective past its bound (``trade_refused``)."""
    for c in cands.values():
        if _same(sc, c["overrides"]):
            c["in_place"] = True
    todo = {n: c["overrides"] for n, c in cands.items() if not c.get("in_place")}
    got = runner.runs(todo) if todo else {}
    for name, c in cands.items():
        if c.get("in_place"):
            c.update(adopt=False, why="already in place")
            continue
        mets = metrics(got[name])
        c["runs"] = dict(zip(runner.labels, mets, strict=True))
        v = verdict(base, mets, key)
        c["validation"] = v
        c["costs"] = costs(base, mets)
        c["adopt"] = v["every_run"]
        if c["family"] == "flow_limit":
            fdrops = sum(r["drops_by_reason"].get("flow_limit", 0) for r in mets)
            c["flow_limit_drops"] = fdrops
            if not fdrops:
                c["adopt"], c["why"] = False, "flow limit dropped nothing in simulation"
        refused = trade_refused(base, mets, key, accept_latency) if c["adopt"] else None
        if refused:
            c["adopt"], c["why"], c["trade_refused"] = False, refused, True
        if "why" not in c:
            c["why"] = _why(v)


def trade_refused(base: list[dict], cand: list[dict], key: str,
                  accept_latency: bool) -> str | None:
    """Why a setting that improves ``key`` is still not recommended, or None: for drops
    or balance it raises the mean p99 by more than LATENCY_BOUND (unless the user
    accepts it); for latency it drops packets that were not dropped."""
    if key == "p99_ns":
        db = sum(r["drops"] for r in base)
        da = sum(r["drops"] for r in cand)
        if da > db:
            return f"drops more packets ({db:,} -> {da:,} over {len(base)} runs)"
        return None
    pb = float(np.mean([r["p99_ns"] for r in base]))
    pa = float(np.mean([r["p99_ns"] for r in cand]))
    if accept_latency or pa <= pb * (1 + LATENCY_BOUND):
        return None
    return (f"raises p99 latency {fmt_ns(pb)} -> {fmt_ns(pa)} (+{pa / pb - 1:.0%}, past "
            f"the {LATENCY_BOUND:.0%} bound; --accept-latency allows it)")


def _steering_simulated(ver: dict, cands: dict[str, dict], picks: list[str]) -> None:
    """RPS's and RFS's verdicts say what their simulation showed, once it ran (the
    expectation from the base run alone is kept as ``expected``)."""
    for k in ("rps", "rfs"):
        c = cands.get(k)
        if c is None or "validation" not in c:
            continue
        v = ver[k]
        v["expected"], v["expected_why"] = v["verdict"], v["why"]
        v["verdict"] = ("recommended" if k in picks else
                        "helps, not recommended" if c["adopt"] else "tried, not recommended")
        v["why"] = f"simulated: {c['why']} (expected: {v['expected_why']})"


# what ``searched`` calls each family of candidates
KIND_OF = {"table": "indirection table", "rps": "steering", "rfs": "steering",
           "ring": "drops", "irq": "drops", "queues": "drops", "flow_limit": "drops",
           "backlog": "drops", "rcvbuf": "drops", "shared_cpu": "placement",
           "moderation": "moderation", "deferral": "deferral", "busy_poll": "busy polling"}


def searched(cands: dict[str, dict], indir: dict, ver: dict, ds: dict, lat_said: list[str],
             objective: str) -> list[dict]:
    """Each kind of setting tune searched for this objective: the candidates it tried,
    or why it tried none."""
    kinds = ["indirection table", "steering", "drops"]
    if objective == "latency":
        kinds += ["moderation", "deferral", "busy polling", "placement"]
    tried: dict[str, list[str]] = {k: [] for k in kinds}
    for name, c in cands.items():
        tried.setdefault(KIND_OF[c["family"]], []).append(name)
    why = {"indirection table": indir.get("why") or "no table moved a bucket",
           "steering": "; ".join(f"{k.upper()} {ver[k]['verdict']}" for k in ver
                                 if isinstance(ver[k], dict) and "verdict" in ver[k]),
           "drops": ("no drops in any run" if not ds["total"] else
                     "; ".join(ds["not_addressed"]) or "no setting addresses them")}
    for s in lat_said:
        kind, _, text = s.partition(": ")
        why[kind] = text
    return [{"kind": k, "tried": v, **({} if v else {"why": why.get(k, "")})}
            for k, v in tried.items()]


def _best_by_family(cands: dict[str, dict]) -> list[str]:
    """Per family, the adopted candidate with the lowest mean after (the first of equals),
    families in the order their first adopted candidate comes."""
    best: dict[str, str] = {}
    for name, c in cands.items():
        if c.get("adopt"):
            f = c["family"]
            if f not in best or (c["validation"]["mean_after"]
                                 < cands[best[f]]["validation"]["mean_after"]):
                best[f] = name
    return list(best.values())


def _recommend(runner: Runner, cands: dict[str, dict], base: list[dict], key: str,
               metrics: Callable[[list[dict]], list[dict]],
               notes: list[str]) -> tuple[list[str], dict, list[dict]]:
    """The best of each family, together if together they improve ``key`` on every run
    (simulated), else the best one alone: (picks, their overrides, figures after)."""
    picks = _best_by_family(cands)
    if not picks:
        return picks, {}, base
    labels = runner.labels
    merged: dict = {}
    for n in picks:
        merged.update(cands[n]["overrides"])
    if len(picks) == 1:
        return picks, merged, [cands[picks[0]]["runs"][lab] for lab in labels]
    comb = metrics(runner.runs({"combined": merged})["combined"])
    if verdict(base, comb, key)["every_run"]:
        return picks, merged, comb
    one = min(picks, key=lambda n: cands[n]["validation"]["mean_after"])
    notes.append(f"together, {', '.join(picks)} did not improve {key} on every run; "
                 f"recommending {one} alone")
    return [one], cands[one]["overrides"], [cands[one]["runs"][lab] for lab in labels]


def _outcome(labels: list[str], base: list[dict], after: list[dict], picks: list[str],
             key: str, target_drops: float) -> dict:
    """The report's figures before and after the recommendation, its verdict and costs,
    and whether the victims' drop rate meets ``target_drops``."""
    return {
        "before": dict(zip(labels, base, strict=True)),
        "after": dict(zip(labels, after, strict=True)),
        "validation": verdict(base, after, key) if picks else None,
        "costs": costs(base, after) if picks else [],
        "target_drops": {"victim_drop_rate": target_drops,
                         "met_before": all(b["victim_drop_rate"] <= target_drops for b in base),
                         "met_after": all(a["victim_drop_rate"] <= target_drops
                                          for a in after)},
    }


def idle_runs(v: dict) -> int:
    """Runs of a verdict with nothing to improve: the metric 0 before and after."""
    return sum(1 for b, a in zip(v["before"], v["after"], strict=True) if b == 0 and a == 0)


def _why(v: dict) -> str:
    idle = idle_runs(v)
    if v["every_run"]:
        return ("better on every run" if not idle else
                f"better on every run with something to improve ({v['wins']}; {idle} had "
                f"{v['metric']} 0 before and after)")
    return f"better on {v['wins']} of {v['runs']} runs only"


def _cpulist(cpus) -> str:
    from rxlab.cpuset import format_cpulist

    return format_cpulist(cpus)


def _tables(sc, m, fl, d0: dict, rounds: int, form: str, flow_steering) -> dict:
    """Table candidates for real flows, from the load model fitted to the capture run."""
    steer = flow_steering(sc, fl)
    size, nq, ncpu = sc.nic.rss.table_size, sc.nic.queues, sc.host.cpus
    mask = np.uint32(size - 1)
    bucket = (steer["rss_hash"] & mask).astype(np.int64)
    table0 = np.asarray(steer["table"], np.int64)
    by_table = table0[bucket] == steer["rxq"]
    bucket_pps = np.bincount(bucket[by_table], weights=fl.rate_pps[by_table], minlength=size)
    irq = np.asarray(m.params.queue["irq_cpu"], np.int64)
    busy = np.array([1.0 - c["util"]["idle"] for c in d0["cpus"]])
    rx_busy = np.array([c["util"]["softirq"] + c["util"]["irq"] for c in d0["cpus"]])
    q_pps = np.bincount(steer["rxq"], weights=fl.rate_pps, minlength=nq)
    cpu_pps = np.bincount(irq, weights=q_pps, minlength=ncpu)
    c = m.config["costs_ns"]
    first = c["driver_rx"] + c["gro"] + c["rps_enqueue"]
    full = first + c["stack_rx"] + c["socket_enqueue"]
    model = balance.LoadModel.fit(bucket_pps, irq, busy, rx_busy, cpu_pps,
                                  rps=bool(m.params.rps_needed),
                                  rps_share=first / full if full else 1.0)
    if not by_table.all():  # n-tuple-steered flows: fixed load on their queue's CPU
        extra_q = np.bincount(steer["rxq"][~by_table], weights=fl.rate_pps[~by_table],
                              minlength=nq)
        model.base = model.base + np.bincount(irq, weights=extra_q, minlength=ncpu) * (
            model.cost_ns * 1e-9)
    rs = balance.rsspp(model, table0, rounds)
    wt = balance.contiguous(model)
    ours = balance.optimise(model, table0, {"rsspp": rs.table, "rsspp_best_run": rs.best_table,
                                            "weight_form": wt["table"]})
    lb = balance.lower_bound(model)
    mean_pred = model.summary(table0)["mean"]
    tables = {"rsspp": rs.table, "rsspp_best_run": rs.best_table, "ours": ours["table"],
              "ours_weight": wt["table"]}
    out: dict = {}
    seen: dict[bytes, str] = {table0.tobytes(): "before"}
    for name, t in tables.items():
        k = t.tobytes()
        out[name] = {"table": [int(x) for x in t], "buckets_moved": balance.buckets_moved(
            t, table0), "same_table_as": seen.get(k),
            "predicted": {a: round(b, 4) for a, b in model.summary(t).items()},
            "ethtool": balance.rxfh_form(t, nq)}
        seen.setdefault(k, name)
    out["rsspp"]["rounds"] = rs.rounds
    out["ours"]["start"] = ours["start"]
    out["ours_weight"]["weights"] = wt["weights"]
    return {"bucket_pps": [round(float(x), 3) for x in bucket_pps],
            "load_model": {"cost_ns_per_packet": round(model.cost_ns, 2),
                           "irq_cpu_overhead": round(model.irq_ns * 1e-9, 4),
                           "source": model.source},
            "lower_bound": {"max": round(lb, 4),
                            "imbalance": round(lb / mean_pred, 4) if mean_pred else 1.0},
            "before_predicted": {a: round(b, 4) for a, b in model.summary(table0).items()},
            "candidates": out}


def commands(r: dict, sc: Scenario, dev: str) -> list[dict]:
    """The exact commands for the recommended settings, each with what it does."""
    out: list[dict] = []
    ov = r["overrides"]
    ind = ov.get("nic.rss.indirection")
    if isinstance(ind, dict) and "weight" in ind:
        out.append({"cmd": f"ethtool -X {dev} weight {' '.join(map(str, ind['weight']))}",
                    "what": "indirection table, contiguous runs"})
    elif ind is not None:
        form = balance.rxfh_form(np.asarray(ind), sc.nic.queues)
        if form and "equal" in form:
            out.append({"cmd": f"ethtool -X {dev} equal {form['equal']}",
                        "what": "indirection table"})
        elif form and "weight" in form:
            out.append({"cmd": f"ethtool -X {dev} weight {' '.join(map(str, form['weight']))}",
                        "what": "indirection table, contiguous runs"})
        else:
            js = json.dumps({"header": {"dev-name": dev}, "indir": list(ind)})
            out.append({"cmd": f"ynl --family ethtool --do rss-set --json '{js}'",
                        "what": "indirection table: an explicit table, which the ethtool CLI "
                                "cannot write (-X takes only equal N | weight W... | "
                                "default); netlink ETHTOOL_MSG_RSS_SET takes it"})
    if "nic.queues" in ov:
        out.append({"cmd": f"ethtool -L {dev} combined {ov['nic.queues']}",
                    "what": "rx queues (the driver spreads their IRQs)"})
    if ov.get("nic.irq_affinity"):
        for q, c in enumerate(ov["nic.irq_affinity"]):
            out.append({"cmd": f"echo {c} > /proc/irq/$(grep -m1 '{dev}.*-{q}$' "
                               f"/proc/interrupts | cut -d: -f1 | tr -d ' ')"
                               "/smp_affinity_list",
                        "what": f"queue {q}'s rx interrupt on CPU {c}"})
    if "nic.rx_usecs" in ov:
        out.append({"cmd": f"ethtool -C {dev} adaptive-rx off rx-usecs "
                           f"{ov['nic.rx_usecs']:g}",
                    "what": "interrupt moderation: a fixed rx-usecs (adaptive moderation "
                            "off, as rxlab models it)"})
    if "nic.napi_defer_hard_irqs" in ov:
        out.append({"cmd": f"echo {ov['nic.napi_defer_hard_irqs']} > "
                           f"/sys/class/net/{dev}/napi_defer_hard_irqs",
                    "what": "IRQ deferral: empty polls the IRQ stays masked for (every NAPI "
                            "of the device; one NAPI: ynl --family netdev --do napi-set, "
                            "6.13+)"})
    if "nic.gro_flush_timeout" in ov:
        out.append({"cmd": f"echo {ov['nic.gro_flush_timeout']} > "
                           f"/sys/class/net/{dev}/gro_flush_timeout",
                    "what": "the NAPI hrtimer's period while IRQs are deferred, ns"})
    if "nic.ring_size" in ov:
        out.append({"cmd": f"ethtool -G {dev} rx {ov['nic.ring_size']}",
                    "what": "rx descriptor ring length"})
    if ov.get("nic.threaded"):
        out.append({"cmd": f"echo 1 > /sys/class/net/{dev}/threaded",
                    "what": "threaded NAPI: each queue's polls in its kthread napi/DEV-ID "
                            "(5.12+; pin them with taskset, Documentation/networking/napi.rst)"})
    if "kernel.rps_cpus" in ov:
        out.append({"cmd": f"for f in /sys/class/net/{dev}/queues/rx-*/rps_cpus; do "
                           f"echo {ov['kernel.rps_cpus']} > $f; done",
                    "what": "RPS: protocol work to the CPUs without rx interrupts"})
    if "kernel.busy_read" in ov:
        out.append({"cmd": f"sysctl -w net.core.busy_read={ov['kernel.busy_read']}",
                    "what": "busy polling: the SO_BUSY_POLL default of every socket created "
                            "after it (restart the service; per socket: setsockopt "
                            "SO_BUSY_POLL, the preferred way)"})
    if "kernel.rps_sock_flow_entries" in ov:
        out.append({"cmd": "sysctl -w net.core.rps_sock_flow_entries="
                           f"{ov['kernel.rps_sock_flow_entries']}",
                    "what": "RFS global socket flow table"})
        out.append({"cmd": f"for f in /sys/class/net/{dev}/queues/rx-*/rps_flow_cnt; do "
                           f"echo {ov['kernel.rps_flow_cnt']} > $f; done",
                    "what": "RFS per-queue flow tables"})
    if "kernel.flow_limit_table_len" in ov:
        out.append({"cmd": "sysctl -w net.core.flow_limit_table_len="
                           f"{ov['kernel.flow_limit_table_len']}",
                    "what": "flow-limit table length (read when a CPU's table is allocated: "
                            "set it before the bitmap)"})
    if "kernel.flow_limit_cpu_bitmap" in ov:
        out.append({"cmd": "sysctl -w net.core.flow_limit_cpu_bitmap="
                           f"{ov['kernel.flow_limit_cpu_bitmap']}",
                    "what": "flow limit on the CPUs that enqueue to the backlog"})
    if "kernel.netdev_max_backlog" in ov:
        out.append({"cmd": f"sysctl -w net.core.netdev_max_backlog="
                           f"{ov['kernel.netdev_max_backlog']}",
                    "what": "per-CPU backlog length"})
    for k, v in ov.items():
        if k.startswith("apps.") and k.endswith(".cpus"):
            a = sc.apps[int(k.split(".")[1])].name
            out.append({"cmd": f"taskset -apc {_cpulist(v)} $(pidof {a})",
                        "what": f"{a}'s threads on CPUs {_cpulist(v)} (one per CPU as "
                                "before; or its own pinning setting)"})
    rcv = {k: v for k, v in ov.items() if k.startswith("apps.") and k.endswith(".rcvbuf")}
    if rcv:
        top = max(rcv.values())
        out.append({"cmd": f"sysctl -w net.core.rmem_max={top}",
                    "what": "let applications ask for the larger buffer"})
        for k, v in rcv.items():
            a = sc.apps[int(k.split(".")[1])].name
            out.append({"cmd": f"# in {a}: setsockopt(fd, SOL_SOCKET, SO_RCVBUF, {v})",
                        "what": f"{a}'s socket receive buffer"})
    return out


def scenario_yaml(sc: Scenario, report: dict, form: str = "explicit") -> str:
    """The scenario with the recommended settings, as YAML with a comment header."""
    import yaml

    ov = dict(report["overrides"])
    if report["duration_s"] != sc.duration:
        ov.setdefault("duration", report["duration_s"])
    new = with_overrides(sc, ov) if ov else sc
    data = new.model_dump(mode="json", exclude_none=True)
    head = [f"# rxlab tune {sc.name}: recommended settings (objective {report['objective']}).",
            "# Simulate it with `rxlab run FILE`; apply it with `rxlab host apply FILE --dev "
            "DEV`,", "# which sets tables ethtool -X can write (equal/weight) and the "
            "net.core sysctls it knows;", "# the commands below cover the rest:"]
    head += [f"#   {c['cmd']}" for c in report["commands"]]
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False)
