"""``tune(scenario)``: recommendations for a host, each checked by simulation.

1. Indirection table: per-bucket load from the scenario's flows (RSS hash, rates) and a
   load model fitted to a simulated run (``balance.LoadModel``); RSS++'s greedy migration
   (baseline), ours, and the best table ``ethtool -X weight`` can write; each simulated
   with ``nic.rss.indirection: [explicit list]`` and compared with the current table.
2. RFS tables for a target collision rate (``rfs.size_tables``) and whether RPS, RFS and
   aRFS help at all (``rfs.verdicts``); a "may help" is simulated before it is advised.
3. flow_limit and netdev_max_backlog for a target drop rate under an antagonist
   (``backlog.search``), when ``--objective drops`` or an antagonist is given.

Everything is a function of the scenario and its seed: the same input gives the same
report.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from rxlab.errors import UsageError
from rxlab.scenario import Scenario, with_overrides
from rxlab.tune import backlog, balance, rfs

OBJECTIVES = ("balance", "latency", "drops")
CANDIDATE_ORDER = ("ours", "ours_weight", "rsspp", "rsspp_best_run", "before")
TIE = 0.002  # relative: simulated differences below this are ties (earlier name wins)


def sim_metrics(d: dict, cpus, victims: list[str] | None = None) -> dict:
    """Side-by-side figures of one simulated run (loads over the IRQ CPUs; the drop
    rate of the ``victims`` groups, all groups by default)."""
    busy = np.array([1.0 - c["util"]["idle"] for c in d["cpus"]])
    sel = busy[list(cpus)] if len(cpus) else busy
    lat = d["latency_ns"]
    p99 = lat["to_app"]["p99"] if lat["to_app"]["samples"] else lat["to_socket"]["p99"]
    pk = d["packets"]
    mean = float(sel.mean())
    return {
        "max_load": round(float(sel.max()), 4),
        "max_load_all": round(float(busy.max()), 4),
        "mean_load": round(mean, 4),
        "imbalance": round(float(sel.max()) / mean, 4) if mean > 0 else 1.0,
        "p99_ns": float(p99 or 0.0),  # None: nothing delivered
        "drops": int(pk["dropped"]),
        "drop_rate": round(pk["dropped"] / pk["offered"], 6) if pk["offered"] else 0.0,
        "delivered": int(pk["delivered"]),
        "victim_drop_rate": round(backlog.group_loss(
            d, victims or list(d["flows_by_group"]))["drop_rate"], 6),
    }


def _check(objective, collision_target, target_drops, antagonist, rounds, duration, sc):
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
    names = sc.traffic.group_names()
    if antagonist is not None and antagonist not in names:
        raise UsageError(f"--antagonist {antagonist!r}: no traffic group of that name "
                         f"(groups: {', '.join(names)})")
    size = sc.nic.rss.table_size
    if size & (size - 1):
        raise UsageError(f"nic.rss.table_size {size}: rxlab tune needs a power of two "
                         "(bucket = hash & (size - 1))")


def _auto_antagonist(sc: Scenario) -> str | None:
    """The group with the heaviest single flow, when there are several groups."""
    gs = sc.traffic.groups
    if len(gs) < 2:
        return None
    return max(gs, key=lambda g: (g.rate.pps / g.flows if g.rate.per_flow == "constant"
                                  else g.rate.pps)).name


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
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Recommendations and their simulated before/after, as a JSON-able dict."""
    from rxlab.build import build, flow_steering
    from rxlab.kernel.versions import behaviour
    from rxlab.simulate import simulate

    _check(objective, collision_target, target_drops, antagonist, rounds, duration, sc)
    if form not in ("explicit", "weight"):
        raise UsageError(f"--form {form!r}: choose explicit or weight")
    if duration is not None:
        sc = with_overrides(sc, {"duration": duration})
    say = progress or (lambda msg: None)
    kb = behaviour(sc.host.kernel)
    m = build(sc)
    fl = m.flows
    steer = flow_steering(sc, fl)
    size, nq, ncpu = sc.nic.rss.table_size, sc.nic.queues, sc.host.cpus
    mask = np.uint32(size - 1)
    bucket = (steer["rss_hash"] & mask).astype(np.int64)
    table0 = np.asarray(steer["table"], np.int64)
    by_table = table0[bucket] == steer["rxq"]  # flows an n-tuple rule does not override
    bucket_pps = np.bincount(bucket[by_table], weights=fl.rate_pps[by_table], minlength=size)
    irq = np.asarray(m.params.queue["irq_cpu"], np.int64)
    irq_cpus = sorted(set(irq.tolist()))
    rps_now = set()
    for q in range(nq):
        rps_now |= set(np.asarray(m.params.rps_map[q][: m.params.queue[q]["rps_len"]]).tolist())
    # CPUs in use: rx interrupts, RPS targets, consumer threads (+ RPS targets we add)
    use_cpus = sorted(set(irq_cpus) | rps_now | {c for _, c in m.threads})
    sims: dict[str, dict] = {}
    ant = antagonist
    if ant is None and objective == "drops":
        ant = _auto_antagonist(sc)
    victims = [g for g in sc.traffic.group_names() if g != ant] or sc.traffic.group_names()

    def metrics(d: dict) -> dict:
        return sim_metrics(d, use_cpus, victims)

    def run(name: str, overrides: dict | None = None) -> dict:
        say(f"simulating {name}")
        res = simulate(sc, overrides=overrides or None)
        sims[name] = res.data
        return res.data

    d0 = run("before")
    before = metrics(d0)
    busy = np.array([1.0 - c["util"]["idle"] for c in d0["cpus"]])
    rx_busy = np.array([c["util"]["softirq"] + c["util"]["irq"] for c in d0["cpus"]])
    q_pps = np.bincount(steer["rxq"], weights=fl.rate_pps, minlength=nq)
    cpu_pps = np.bincount(irq, weights=q_pps, minlength=ncpu)
    costs = m.config["costs_ns"]
    first = costs["driver_rx"] + costs["gro"] + costs["rps_enqueue"]
    full = first + costs["stack_rx"] + costs["socket_enqueue"]
    rps = bool(m.params.rps_needed)
    model = balance.LoadModel.fit(bucket_pps, irq, busy, rx_busy, cpu_pps, rps=rps,
                                  rps_share=first / full if full else 1.0)
    if not by_table.all():  # n-tuple-steered flows: fixed load on their queue's CPU
        extra_q = np.bincount(steer["rxq"][~by_table], weights=fl.rate_pps[~by_table],
                              minlength=nq)
        model.base = model.base + np.bincount(irq, weights=extra_q, minlength=ncpu) * (
            model.cost_ns * 1e-9)

    notes: list[str] = []
    if sc.nic.driver == "mvpp2" and not sc.nic.rxhash:
        notes.append("mvpp2 with rxhash off sends every flow to queue 0: the table has no "
                     "effect until rxhash is on (ethtool -K DEV rxhash on)")
    if not by_table.any():
        notes.append("every flow is steered by an n-tuple rule: the table has no effect")

    # ---- tables -----------------------------------------------------------------------
    rs = balance.rsspp(model, table0, rounds)
    wt = balance.contiguous(model)
    ours = balance.optimise(model, table0, {"rsspp": rs.table, "rsspp_best_run": rs.best_table,
                                            "weight_form": wt["table"]})
    lb = balance.lower_bound(model)
    mean_pred = model.summary(table0)["mean"]
    tables = {"before": table0, "rsspp": rs.table, "rsspp_best_run": rs.best_table,
              "ours": ours["table"], "ours_weight": wt["table"]}
    cands: dict[str, dict] = {}
    seen: dict[bytes, str] = {}
    for name in ("before", "rsspp", "rsspp_best_run", "ours", "ours_weight"):
        t = tables[name]
        key = t.tobytes()
        if name == "before":
            d = d0
        elif key in seen:
            d = sims[seen[key]]
        else:
            d = run(name, {"nic.rss.indirection": [int(x) for x in t]})
        seen.setdefault(key, name)
        pred = model.summary(t)
        cands[name] = {
            "table": [int(x) for x in t],
            "buckets_moved": balance.buckets_moved(t, table0),
            "same_table_as": seen[key] if seen[key] != name else None,
            "predicted": {k: round(v, 4) for k, v in pred.items()},
            "simulated": metrics(d),
            "ethtool": balance.rxfh_form(t, nq),
        }
    cands["rsspp"]["rounds"] = rs.rounds
    cands["rsspp_best_run"]["rounds"] = rs.best_rounds
    cands["ours"]["start"] = ours["start"]
    cands["ours"]["starts"] = {k: {"max": round(v["max"], 4), "moved": v["moved"]}
                               for k, v in ours["candidates"].items()}
    cands["ours_weight"]["weights"] = wt["weights"]

    key_of = {
        "balance": lambda s: (s["imbalance"], s["p99_ns"]),
        "latency": lambda s: (s["p99_ns"], s["imbalance"]),
        "drops": lambda s: (s["victim_drop_rate"], s["p99_ns"]),
    }[objective]
    order = list(CANDIDATE_ORDER)
    if form == "weight":  # only what ethtool -X (and rxlab host apply) can write
        order = [n for n in order if cands[n]["ethtool"] is not None]
    pick = order[0]
    for name in order[1:]:
        a, b = key_of(cands[name]["simulated"]), key_of(cands[pick]["simulated"])
        if a[0] < b[0] * (1 - TIE) - 1e-12 or (abs(a[0] - b[0]) <= TIE * abs(b[0]) and
                                               a[1] < b[1] * (1 - TIE)):
            pick = name
    if np.array_equal(tables[pick], table0):
        pick = "before"
    rec_table = tables[pick]
    indir = {
        "table_size": size, "queues": nq, "irq_cpus": irq_cpus,
        "bucket_pps": [round(float(x), 3) for x in bucket_pps],
        "load_model": {"cost_ns_per_packet": round(model.cost_ns, 2),
                       "irq_cpu_overhead": round(model.irq_ns * 1e-9, 4),
                       "source": model.source},
        "lower_bound": {"max": round(lb, 4),
                        "imbalance": round(lb / mean_pred, 4) if mean_pred else 1.0},
        "candidates": cands,
        "recommended": pick,
    }

    # ---- RFS sizing and verdicts --------------------------------------------------------
    rq = np.where(by_table, rec_table[bucket], steer["rxq"]).astype(np.int64)
    fs = m.params.flow["flow_sock"]
    record = np.array([bool(m.so.sock["sock_record"][s]) if s >= 0 else False for s in fs])
    sizes = rfs.size_tables(steer["skb_hash"][record], rq[record], rec_table, nq,
                            collision_target, kb.version)
    sizes["recording_flows_note"] = ("flows whose socket records its CPU: connected "
                                     "sockets with a consumer (reference 4.2)")
    ver = rfs.verdicts(d0, sc, m, sizes)
    after_ov: dict = {}
    if pick != "before":
        after_ov["nic.rss.indirection"] = (
            {"weight": cands[pick]["ethtool"]["weight"]}
            if form == "weight" and "weight" in (cands[pick]["ethtool"] or {})
            else [int(x) for x in rec_table])
    after = cands[pick]["simulated"]
    after_data = sims[cands[pick]["same_table_as"] or pick]
    checks = {}
    adopt_key = {"balance": lambda x: x["max_load_all"], "latency": lambda x: x["p99_ns"],
                 "drops": lambda x: x["victim_drop_rate"]}[objective]
    others = ver["rps"]["spread_to"]
    if ver["rps"]["verdict"] == "yes" and not set(others) <= rps_now:
        ov = {**after_ov, "kernel.rps_cpus": backlog.cpu_mask(others)}
        d = run("rps", ov)
        s = metrics(d)
        better = adopt_key(s) < adopt_key(after) * (1 - TIE)
        checks["rps"] = {"overrides": ov, "simulated": s, "adopt": better}
        if better:
            after_ov, after, after_data = ov, s, d
            use_cpus[:] = sorted(set(use_cpus) | set(others))
    if ver["rfs"]["verdict"] == "may help" and not ver["rfs"]["enabled"]:
        ov = {**after_ov, "kernel.rps_sock_flow_entries": sizes["rps_sock_flow_entries"],
              "kernel.rps_flow_cnt": sizes["rps_flow_cnt"]}
        d = run("rfs", ov)
        s = metrics(d)
        better = adopt_key(s) < adopt_key(after) * (1 - TIE)
        checks["rfs"] = {"overrides": ov, "simulated": s, "adopt": better}
        if better:
            after_ov, after, after_data = ov, s, d
    ver["simulated_checks"] = checks

    # ---- flow limit / backlog ---------------------------------------------------------
    if objective == "drops" or antagonist is not None:
        fls = backlog.search(sc, m, simulate=lambda s, overrides: _sim(s, overrides, say),
                             base_overrides=after_ov, antagonist=ant, target=target_drops,
                             metrics=metrics)
        if fls.get("applicable") and fls["overrides"]:
            after_ov = {**after_ov, **fls["overrides"]}
            row = next(r for r in fls["rows"] if r["setting"] == fls["recommended"])
            after, after_data = {k: row[k] for k in before}, None
    else:
        fls = {"searched": False, "why": "run with --objective drops or --antagonist GROUP "
                                          "to search flow_limit and netdev_max_backlog"}

    before = metrics(d0)  # over the final set of CPUs in use
    if after_data is not None:
        after = metrics(after_data)
    report = {
        "scenario": sc.name, "seed": sc.seed, "duration_s": sc.duration,
        "objective": objective, "device": dev, "kernel": sc.host.kernel,
        "flows": len(fl), "queues": nq, "cpus": ncpu,
        "indirection": indir,
        "rfs": sizes,
        "steering": ver,
        "flow_limit": fls,
        "cpus_in_use": list(use_cpus),
        "before": before,
        "after": after,
        "overrides": after_ov,
        "notes": notes,
    }
    report["commands"] = commands(report, dev, kb.version)
    return report


def _sim(sc, overrides, say):
    from rxlab.simulate import simulate

    say("simulating flow-limit/backlog candidate")
    return simulate(sc, overrides=overrides or None)


def commands(r: dict, dev: str, kernel: tuple) -> list[dict]:
    """The exact commands for the recommended settings, each with what it does."""
    out: list[dict] = []
    ind = r["indirection"]
    pick = ind["recommended"]
    ov = r["overrides"]
    if pick != "before":
        c = ind["candidates"][pick]
        form = c["ethtool"]
        if form and "weight" in form:
            out.append({"cmd": f"ethtool -X {dev} weight {' '.join(map(str, form['weight']))}",
                        "what": f"indirection table ({pick}), contiguous runs"})
        elif form:
            out.append({"cmd": f"ethtool -X {dev} equal {form['equal']}",
                        "what": f"indirection table ({pick})"})
        else:
            js = json.dumps({"header": {"dev-name": dev}, "indir": c["table"]})
            out.append({"cmd": f"ynl --family ethtool --do rss-set --json '{js}'",
                        "what": f"indirection table ({pick}): an explicit table, which the "
                                "ethtool CLI cannot write (-X takes only equal N | weight "
                                "W... | default); netlink ETHTOOL_MSG_RSS_SET takes it (its "
                                "length must divide the device table size), so does the "
                                "ETHTOOL_SRXFH ioctl (exactly the device size)"})
            w = ind["candidates"]["ours_weight"]
            out.append({"cmd": f"ethtool -X {dev} weight "
                               f"{' '.join(map(str, w['weights']))}",
                        "what": "alternative with the ethtool CLI (and rxlab host apply): "
                                "best contiguous-run table, simulated imbalance "
                                f"{w['simulated']['imbalance']:.3f}"})
    if "kernel.rps_cpus" in ov:
        out.append({"cmd": f"for f in /sys/class/net/{dev}/queues/rx-*/rps_cpus; do "
                           f"echo {ov['kernel.rps_cpus']} > $f; done",
                    "what": "RPS: protocol work to the CPUs without rx interrupts"})
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
    return out


def scenario_yaml(sc: Scenario, report: dict, form: str = "explicit") -> str:
    """The scenario with the recommended settings, as YAML with a comment header."""
    import yaml

    ov = dict(report["overrides"])
    if form == "weight" and "nic.rss.indirection" in ov:
        w = report["indirection"]["candidates"]["ours_weight"]["weights"]
        ov["nic.rss.indirection"] = {"weight": w}
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
