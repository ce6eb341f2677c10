"""Seed 000: ice aRFS exact flow match (Krishna Kumar's patch, tested June 2025).

Two 144-core servers, 144 queues with IRQs 1:1, XPS and aRFS on, 16K long-lived TCP
flows whose consumers are pinned to cores 0-71 in order, rps_sock_flow_entries =
144 x rps_flow_cnt. The original driver matches a filter on flow_id alone, so colliding
flows keep stealing one filter (updates, mis-steering, CPU); the patched one matches the
5-tuple.

Which flow_id rule: the seed's whole table, run under both rules, points to
flow_id = hash_32(hash, log) ("net: rfs: hash function change", v6.15): under
hash & mask (up to v6.14) the original driver can hold only 1,024/2,048 filters for the
16K flows and about half the packets would land on queues 72-143, against the seed's
good:bad of 214 and 1.1M (docs/model.md, "Which kernel seed 000 ran"). Active filters are not yet
protected (v6.18). The default is therefore kernel "6.15"; ``--kernel 6.14`` runs the
hash & mask rule, ``--kernel 6.18`` the protection.

``seed_table`` puts the seed's whole posted table beside the model's: every row,
original against patched at both sizes, with patched/original and 512/2048 ratios.
"""

from __future__ import annotations

from rxlab.nic.collisions import birthday, observed
from rxlab.repro.base import _r, claim, fig, interval, make

NAME = "arfs-flow-match"
TITLE = "Seed 000: ice aRFS flow_id match vs 5-tuple match (144 CPUs/queues, 16K TCP flows)"
SEED = "000_3d314907a8ad66af.txt"
TABLE = ["good_queue_packets", "bad_queue_packets", "good_bad_ratio", "arfs_add",
         "arfs_update", "arfs_skip", "arfs_avoided", "cpu_user", "cpu_system",
         "cpu_softirq", "cpu_total", "collisions_model", "collisions_observed"]

CPUS = 144
FLOWS = 16_384
CONSUMER_CPUS = 72  # netperf pinned to cores 0-71
PPS_PER_FLOW = 100  # assumption: the seed does not give rates
KERNEL = "6.15"  # the kernel the seed ran (docstring); --kernel 6.14: the hash & mask rule


def scenario(model: str, flow_cnt: int, duration: float, kernel: str) -> dict:
    return {
        "name": f"arfs-{model}-{flow_cnt}",
        "seed": 0,
        "duration": duration,
        "drain": 0.005,
        "host": {"cpus": CPUS, "kernel": kernel, "cost_profile": "modern-x86"},
        # assumption: the filter table holds every flow (the seed reports no exhaustion)
        "nic": {"driver": "ice", "queues": CPUS, "ring_size": 1024, "link_gbps": 100,
                "arfs": {"model": model, "capacity": 32768}},
        "kernel": {"rps_sock_flow_entries": CPUS * flow_cnt, "rps_flow_cnt": flow_cnt},
        "traffic": {"groups": [{
            "name": "netperf", "flows": FLOWS, "proto": "tcp",
            "src": {"cidr": "10.10.0.0/16"}, "dst": {"addr": "10.20.0.1"},
            "sport": {"range": [1024, 65535]}, "dport": {"value": 12865},
            "rate": {"pps": FLOWS * PPS_PER_FLOW}, "arrivals": "poisson", "size": 1514,
        }]},
        "metrics": {"warmup": duration / 5},  # long-lived flows: count after set-up
        "apps": [{"name": "netperf", "cpus": f"0-{CONSUMER_CPUS - 1}",
                  "spread": "round_robin", "cost": {"user_ns": 1000}, "batch": 16}],
    }


def cases(quick: bool, kernel: str | None):
    dur = 0.25 if quick else 2.0
    k = kernel or KERNEL
    out = []
    for cnt in (512, 2048):
        for model, label in (("ice-hash-match", "hash-match"), ("ice-tuple-match",
                                                                 "tuple-match")):
            params = {"driver": model, "rps_flow_cnt": cnt, "kernel": k}
            out.append((f"{label}/{cnt}", params, make(scenario(model, cnt, dur, k), NAME)))
    return out


def metrics(name: str, res) -> dict:
    d = res.data
    cpus = d["cpus"]
    n = len(cpus)
    cnt = d["config"]["rps_flow_cnt"][0]
    hash32 = d["config"]["rfs_slot"] == "hash_32"
    good = d["steering"]["good_queue_packets"]
    bad = d["steering"]["bad_queue_packets"]
    user = sum(c["util"]["user"] for c in cpus) / n
    system = sum(c["util"]["system"] for c in cpus) / n
    soft = sum(c["util"]["softirq"] for c in cpus) / n
    irq = sum(c["util"]["irq"] for c in cpus) / n
    model = birthday(FLOWS, cnt, hash32)
    return {
        "good_queue_packets": good,
        "bad_queue_packets": bad,
        "good_bad_ratio": round(good / bad, 1) if bad else float(good),
        "arfs_add": d["arfs"]["add"],
        "arfs_update": d["arfs"]["update"],
        "arfs_skip": d["arfs"]["skip"],
        "arfs_avoided": d["arfs"]["avoided"],
        "cpu_user": round(user, 5),
        "cpu_system": round(system, 5),
        "cpu_softirq": round(soft, 5),
        "cpu_total": round(user + system + soft + irq, 5),
        "collisions_model": round(model["pairs"], 1),
        # the seed's own measure: consumers on cores 0-71 and IRQs 1:1, "so that wrong
        # packets on q#s 72-143 can be measured" (a packet another consumer's filter sends
        # to its queue 0-71 counts as good there, unlike good_queue_packets)
        "packets_q0_71": sum(q["packets"] for q in d["queues"]
                             if q["queue"] < CONSUMER_CPUS),
        "packets_q72_143": sum(q["packets"] for q in d["queues"]
                               if q["queue"] >= CONSUMER_CPUS),
        "duration_s": d["duration_s"],  # the counters' time base (per-second rows)
        # packets TCP processed away from their reader (on another CPU, or queued to the
        # socket backlog while the reader held it): what a steering fix can save
        "tcp_away": (d["tcp"]["remote"] + d["tcp"]["backlog"]) if "tcp" in d else None,
    }


def extra_metrics(name: str, sc) -> dict:
    """Colliding flow pairs among the scenario's actual flow hashes."""
    from rxlab.build import flow_steering
    from rxlab.kernel.versions import behaviour
    from rxlab.traffic.flows import build_flows

    fl = build_flows(sc.traffic, sc.seed)
    h = flow_steering(sc, fl)["skb_hash"]
    hash32 = behaviour(sc.host.kernel).rfs_hash32
    return {"collisions_observed": observed(h, sc.kernel.rps_flow_cnt, hash32)["pairs"]}


# Half the seed's relative CPU-total saving (29 -> 22.7 and 29 -> 24.9, in %). No cost is
# set from seed 000, and the model's sourced costs do not reach it (docs/model.md, "TCP
# receive and locality"; saving_budget below says what would): these claims print "not
# held" and OPEN_GAPS lists them. Nor do the saving at 512 and its being larger than at
# 2048: both drivers' softirqs spin for arfs_lock while the service task walks their
# ~13-15K entries after every add (docs/model.md, simplification 19), a third of
# either's CPU at 512 and over half at 2048, and the patch removes few of the calls.
HALF_SAVING = {512: round(50 * (29 - 22.7) / 29, 2), 2048: round(50 * (29 - 24.9) / 29, 2)}
GAP_CLAIM = "{cnt}: tuple match saves at least half the seed's CPU ({need} % of the total)"
LESS_CPU = "{cnt}: tuple match costs less CPU"
SMALLER_AT_2048 = "the CPU saving is smaller at 2048 than at 512"
OPEN_GAPS = (LESS_CPU.format(cnt=512),
             *(GAP_CLAIM.format(cnt=n, need=v) for n, v in HALF_SAVING.items()),
             SMALLER_AT_2048)


def claims(cases: list[dict]):
    m = {c["name"]: c["metrics"] for c in cases}
    out = []
    saving = {}
    for cnt in (512, 2048):
        h, t = m[f"hash-match/{cnt}"], m[f"tuple-match/{cnt}"]
        saving[cnt] = 100 * (h["cpu_total"] - t["cpu_total"])  # points of the host's CPU
        out += [
            claim(f"{cnt}: tuple match makes almost no updates (< 1 % of hash match's)",
                  "predicted",
                  fig("tuple-match updates - 1 % of hash-match's",
                      t["arfs_update"] - max(1, 0.01 * h["arfs_update"]), "<=", 0)),
            claim(f"{cnt}: tuple match puts a larger share of packets on good queues",
                  "predicted",
                  fig("good:bad ratio, tuple - hash match",
                      t["good_bad_ratio"] - h["good_bad_ratio"], ">", 0)),
            claim(LESS_CPU.format(cnt=cnt), "predicted",
                  fig("CPU total, hash - tuple match (% of the host)", saving[cnt],
                      ">", 0)),
        ]
    for cnt, need in HALF_SAVING.items():
        h, t = m[f"hash-match/{cnt}"], m[f"tuple-match/{cnt}"]
        out.append(claim(GAP_CLAIM.format(cnt=cnt, need=need), "predicted",
                         fig("CPU total saving, hash - tuple match (% of hash match's)",
                             100 * (h["cpu_total"] - t["cpu_total"]) / h["cpu_total"],
                             ">=", need)))
    out.append(claim(SMALLER_AT_2048, "predicted",
                     fig("saving at 512 - saving at 2048 (% of the host)",
                         saving[512] - saving[2048], ">", 0)))
    return out


# ------------------------------------------------------------ the seed's whole table --
# Krishna Kumar's runtime comparison in the patch, as quoted in the Tested-by reply:
# netdev, "RE: [Intel-wired-lan] [PATCH v2 net] net: ice: Perform accurate aRFS flow
# match", 12 June 2025, Message-ID
# <IA1PR11MB6241A3B6BBE3E84287C6DA678B74A@IA1PR11MB6241.namprd11.prod.outlook.com>.
# Each cell is "original vs patched"; the runs lasted 180 s.
POSTING = ("netdev, 'RE: [Intel-wired-lan] [PATCH v2 net] net: ice: Perform accurate aRFS "
           "flow match', 12 June 2025, Message-ID <IA1PR11MB6241A3B6BBE3E84287C6DA678B74A@"
           "IA1PR11MB6241.namprd11.prod.outlook.com>")
POSTED = """\
| rps_flow_cnt                  |      512     |    2048      |
| Ratio of Pkts on Good:Bad q's | 214 vs 822K  | 1.1M vs 980K |
| Avoid wrong aRFS programming  | 0 vs 310K    | 0 vs 30K     |
| CPU User                      | 216 vs 183   | 216 vs 206   |
| CPU System                    | 1441 vs 1171 | 1447 vs 1320 |
| CPU Softirq                   | 1245 vs 920  | 1238 vs 961  |
| CPU Total                     | 29 vs 22.7   | 29 vs 24.9   |
| aRFS Update                   | 533K vs 59   | 521K vs 32   |
| aRFS Skip                     | 82M vs 77M   | 7.2M vs 4.5M |
"""
POSTED_DURATION_S = 180.0  # "16K netperf sessions for 180s"
SIZES = (512, 2048)
VARIANTS = ("original", "patched")
_CASE = {"original": "hash-match", "patched": "tuple-match"}

# Units. The seed's User + System + Softirq equal 100 x Total in all four columns, so the
# CPU rows read as per-CPU percentages summed over the CPUs (2902 = 29 CPUs busy) and Total
# as that sum / 100; the model's are given in the same units. The seed's counts cover its
# 180 s and the model's its own run, so both are shown per second. The seed's load
# (netperf's packet rate) is unknown and the model's is an assumption (PPS_PER_FLOW):
# compare levels with care, ratios (patched/original, 512/2048) directly.
UNITS = {
    "ratio": "packets on queues 0-71 per packet on queues 72-143 (both)",
    "per_s": "per second (seed: its count / 180 s; model: its count / its run)",
    "cpu_sum": "per-CPU % summed over the 144 CPUs (seed: inferred, the rows add up to "
               "100 x Total)",
    "cpus": "CPUs busy (seed: User + System + Softirq / 100; model: + irq)",
}
# (key, the seed's row label, printed label, unit)
ROWS = (
    ("good_bad", "Ratio of Pkts on Good:Bad q's", "good:bad packets", "ratio"),
    ("avoided", "Avoid wrong aRFS programming", "avoided wrong prog.", "per_s"),
    ("cpu_user", "CPU User", "CPU user", "cpu_sum"),
    ("cpu_system", "CPU System", "CPU system", "cpu_sum"),
    ("cpu_softirq", "CPU Softirq", "CPU softirq", "cpu_sum"),
    ("cpu_total", "CPU Total", "CPU total", "cpus"),
    ("arfs_update", "aRFS Update", "aRFS update", "per_s"),
    ("arfs_skip", "aRFS Skip", "aRFS skip", "per_s"),
)


def parse_number(text: str) -> float:
    """'214', '22.7', '822K', '1.1M' -> a number (K = 10^3, M = 10^6, as the post uses)."""
    t = text.strip()
    scale = {"K": 1e3, "M": 1e6}.get(t[-1:].upper(), 1.0)
    return float(t[:-1] if scale != 1.0 else t) * scale


def parse_posted(text: str) -> dict:
    """The runtime comparison table of the post (quoted ``>`` lines allowed) ->
    ``{row label: {rps_flow_cnt: (original, patched)}}``."""
    sizes: list[int] = []
    rows: dict = {}
    for line in text.splitlines():
        line = line.lstrip("> \t")
        if not line.startswith("|") or set(line) <= set("|+- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "rps_flow_cnt":
            sizes = [int(c) for c in cells[1:]]
        elif sizes and len(cells) == len(sizes) + 1:
            pairs = [c.split(" vs ") for c in cells[1:]]
            rows[cells[0]] = {n: (parse_number(a), parse_number(b))
                              for n, (a, b) in zip(sizes, pairs, strict=True)}
    return rows


def _model_value(key: str, unit: str, m: dict) -> float | None:
    """One run's figure for a row, in the row's unit (None: the model has no such figure
    or it is undefined, e.g. no bad packet at all)."""
    if key == "good_bad":  # the seed's measure: queues 0-71 against 72-143
        good, bad = m.get("packets_q0_71"), m.get("packets_q72_143")
        return None if good is None or not bad else good / bad
    metric = {"avoided": "arfs_avoided"}.get(key, key)
    if m.get(metric) is None:
        return None
    v = float(m[metric])
    if unit == "per_s":
        return v / m["duration_s"]
    if unit == "cpu_sum":
        return 100.0 * CPUS * v
    if unit == "cpus":
        return CPUS * v
    return v


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _rn(x: float | None) -> float | None:
    return None if x is None else _r(x)


def _stat(values: list) -> dict | None:
    """Mean and 95 % interval over the seeds (None when a seed has no value)."""
    if not values or any(v is None for v in values):
        return None
    mean, lo, hi = interval(values)
    return {"mean": _r(mean), "ci95": [_r(lo), _r(hi)]}


def seed_table(exp: dict) -> dict:
    """The seed's eight rows beside the model's, original against patched at 512 and
    2048, with the patched/original and 512/2048 ratios; the model's figures are means
    and 95 % intervals over the traffic seeds (ratios taken per seed, then averaged)."""
    posted = parse_posted(POSTED)
    runs = {c["name"]: [r["metrics"] for r in c["runs"]] for c in exp["cases"]}
    nseeds = exp["seeds"]
    rows = []
    for key, label, printed, unit in ROWS:
        seed = {n: dict(zip(VARIANTS, posted[label][n], strict=True)) for n in SIZES}
        if unit == "per_s":
            seed = {n: {v: x / POSTED_DURATION_S for v, x in s.items()}
                    for n, s in seed.items()}
        model = {n: {v: [_model_value(key, unit, m) for m in runs[f"{_CASE[v]}/{n}"]]
                     for v in VARIANTS} for n in SIZES}
        modelled = any(x is not None for n in SIZES for v in VARIANTS for x in model[n][v])
        sizes = {}
        for n in SIZES:
            s, mo = seed[n], model[n]
            sizes[str(n)] = {
                "seed": {**{v: _r(x) for v, x in s.items()},
                         "patched_over_original": _rn(_div(s["patched"], s["original"]))},
                "model": None if not modelled else {
                    **{v: _stat(mo[v]) for v in VARIANTS},
                    "patched_over_original": _stat(
                        [_div(mo["patched"][i], mo["original"][i]) for i in range(nseeds)])},
            }
        size_ratio = {
            "seed": {v: _rn(_div(seed[SIZES[0]][v], seed[SIZES[1]][v])) for v in VARIANTS},
            "model": None if not modelled else {
                v: _stat([_div(model[SIZES[0]][v][i], model[SIZES[1]][v][i])
                          for i in range(nseeds)]) for v in VARIANTS},
        }
        rows.append({"row": printed, "posted_as": label, "unit": UNITS[unit],
                     "modelled": modelled, "rps_flow_cnt": sizes,
                     "512_over_2048": size_ratio})
    first = exp["cases"][0]["runs"][0]["metrics"]
    per_flow = first["packets"]["offered"] / FLOWS
    budget = saving_budget(posted, runs, nseeds)
    return {"source": POSTING, "seed_duration_s": POSTED_DURATION_S,
            "kernels": exp.get("kernels", []), "seeds": nseeds,
            "model_duration_s": first["duration_s"],
            "comparison": "seed (original, patched) beside the model's mean and 95 % "
                          "interval over the traffic seeds",
            "rows": rows,
            "budget": budget,
            "notes": [
                "good:bad counts every packet, set-up included, as per-queue counters "
                "do: a flow's packets before its own filter go by RSS, half of them to "
                f"queues 72-143. The model's run gives a flow {per_flow:,.0f} packets, "
                "the seed's 180 s far more, so the model's ratio with few mis-steered "
                "packets (patched) is bounded by its set-up.",
                "The seed's load is unknown and the model's assumed "
                f"({PPS_PER_FLOW} packets/s per flow): levels of the per-second and CPU "
                "rows are not comparable, the ratios are."]}



# --------------------------------------------- what the seed's CPU saving would need --
# The model charges a packet processed away from its reader what its profile's stages give
# (each with its source there): the socket's lines moving (tcp_remote), the reader's cross-CPU
# wake-up (wakeup_remote) and the ndo_rx_flow_steer call (arfs_steer); a filter update
# adds one write (arfs_program). The budget below asks how much a removed event would
# have to cost for the seed's saving to follow from the events the seed counts, and how
# much more the model would have to charge a packet it processes away from its reader to
# reach half the seed's saving; both beside the profile's per-event costs.
LOCALITY_STAGES = ("tcp_remote", "wakeup_remote", "arfs_steer")
PROFILE = "modern-x86"


def saving_budget(posted: dict, runs: dict, nseeds: int) -> dict:
    """Per rps_flow_cnt: the seed's CPU saving against the aRFS events the patch removed
    (its own counters), its saving per unit of application (user) time, and the cost per
    removed mis-steered packet the model would need for half the seed's saving."""
    from rxlab.profiles import stage_costs

    costs = stage_costs(PROFILE, {})
    per_packet_ns = sum(costs[k] for k in LOCALITY_STAGES)
    per_update_ns = per_packet_ns + costs["arfs_program"]
    sizes = {}
    for n in SIZES:
        tot_o, tot_p = posted["CPU Total"][n]
        usr_o, usr_p = posted["CPU User"][n]
        upd_o, upd_p = posted["aRFS Update"][n]
        skp_o, skp_p = posted["aRFS Skip"][n]
        saved = tot_o - tot_p  # CPUs (the rows' unit: per-CPU % summed / 100)
        calls = (upd_o - upd_p + skp_o - skp_p) / POSTED_DURATION_S  # ndo calls removed/s
        need_seed_ns = 1e9 * saved / calls
        h, t = runs[f"hash-match/{n}"], runs[f"tuple-match/{n}"]
        target = HALF_SAVING[n] / 100
        missing, away, need = [], [], []
        for i in range(nseeds):
            o, p = CPUS * h[i]["cpu_total"], CPUS * t[i]["cpu_total"]
            miss = target * o - (o - p)  # CPUs short of half the seed's saving
            d_away = None
            if h[i].get("tcp_away") is not None and t[i].get("tcp_away") is not None:
                d_away = (h[i]["tcp_away"] - t[i]["tcp_away"]) / h[i]["duration_s"]
            missing.append(miss)
            away.append(d_away)
            need.append(1e9 * miss / d_away if d_away and d_away > 0 else None)
        sizes[str(n)] = {
            "seed": {
                "cpu_saved_cpus": _r(saved),
                "saving_pct": _r(100 * saved / tot_o),
                "steer_calls_removed_per_s": _r(calls),
                "cost_per_removed_call_ns": _r(need_seed_ns),
                "times_profile_update_cost": _r(need_seed_ns / per_update_ns),
                "user_ratio": _r(usr_p / usr_o),
                "saving_per_user_time_pct": _r(100 * (1 - (tot_p / usr_p) / (tot_o / usr_o))),
            },
            "model": {
                "half_saving_pct": HALF_SAVING[n],
                "missing_cpus": _stat(missing),
                "away_packets_removed_per_s": _stat(away),
                "extra_cost_per_away_packet_ns": _stat(need),
                "times_profile_packet_cost": _stat(
                    [None if x is None else x / per_packet_ns for x in need]),
            },
        }
    return {
        "profile": PROFILE,
        "profile_packet_ns": _r(per_packet_ns),
        "profile_update_ns": _r(per_update_ns),
        "stages": {k: costs[k] for k in (*LOCALITY_STAGES, "arfs_program")},
        "rps_flow_cnt": sizes,
    }
