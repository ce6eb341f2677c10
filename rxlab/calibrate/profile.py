"""From the calibration runs to a cost profile for ``host.cost_profile``.

Measured stages:

* ``stack_rx``: CPU 1's softirq time per packet on the plain stack (no u32 filters):
  ``process_backlog -> __netif_receive_skb -> ip_rcv -> udp_rcv`` up to the socket
  queue. The fit gives the kernel's total per packet (``c0``); the model spends
  ``stack_rx`` plus other stages (socket enqueue, the cross-CPU miss, IPI and poll
  overheads) on that path, so ``stack_rx`` is set so that the model's own softirq time
  per packet on CPU 1, simulated at the calibration's load, equals ``c0``.
* ``recvmsg``: the receiving process's system time per packet read (getrusage), which
  includes its 1 ms timer sleeps; used only when its standard error is
  below 25 % of the value (without CONFIG_VIRT_CPU_ACCOUNTING the user/system split is
  sampled at each tick, so it is often too noisy).
* ``wakeup_remote``: what waking the receiver on CPU 0 costs CPU 1's softirq
  (``sock_def_readable -> try_to_wake_up``), from the runs with the receiver waiting on
  its sockets: their softirq time beyond the fit, per voluntary context switch of the
  receiver, is reported with its standard error; the profile gets the value with which
  the model's softirq time per packet on CPU 1 in the same lab (its reader at the
  kernel receiver's pace) equals the kernel's, as for ``stack_rx``: the model's reader
  is not woken exactly as often as the Python one.

The other stages keep the base profile's values and say so. The lab's own slowdown
(ns per packet per u32 filter), the sender's system time per packet and the raw runs
are kept under ``lab`` for ``kernel-check --profile``.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket

from rxlab.calibrate.measure import APP_CPU, FLOWS, HANDOFF_PPS, TARGET_CPU
from rxlab.host.fit import ols

DEFAULT_BASE = "modern-x86"
WAKE_DELAY_MAX_NS = 200_000.0  # the receiver's wake-up to read delay searched (bisection)
WAKE_DELAY_STEPS = 11
SIGNIFICANT = 0.25  # a fitted cost replaces the base profile's when its SE is below this share


def fits(points: list[dict], background_ns_per_s: float = 0.0) -> dict:
    """Least squares over every fitted run (each run one row). CPU 1's softirq time
    less the background measured without traffic = c0 * packets + b * filters * packets
    (no intercept: the tracepoints time NET_RX only). Reported besides: the same with a
    term per filter and softirq run (the filters' walk starting cold at each run), not
    used: in the model a poll sees only the packets enqueued before it starts, so it
    splits the sender's bursts into more, shorter runs than the kernel's and would
    charge that cost too often (docs/calibrate.md)."""
    w = [p["window_s"] for p in points]
    proc = [float(p["processed"]) for p in points]
    y = [p["softirq_ns"] - background_ns_per_s * p["window_s"] for p in points]
    pn = [p["filters"] * q for p, q in zip(points, proc, strict=True)]
    soft = ols({"ns_per_packet": proc, "ns_per_packet_per_filter": pn}, y)
    cold = ols({"ns_per_packet": proc, "ns_per_packet_per_filter": pn,
                "ns_per_run_per_filter": [float(p["filters"] * p["softirq_runs"])
                                          for p in points]}, y)
    recv = ols({"ns_per_s": w, "ns_per_packet": [float(p["received"]) for p in points]},
               [p["recv_stime_ns"] for p in points])
    send = ols({"ns_per_s": w, "ns_per_packet": [float(p["sent"]) for p in points]},
               [p["send_stime_ns"] for p in points])
    ticks = ols({"background_ns_per_s": w, "ns_per_packet": proc,
                 "ns_per_packet_per_filter": [p["filters"] * q for p, q in
                                              zip(points, proc, strict=True)]},
                [p["softirq_ticks_ns"] for p in points])
    return {"softirq_cpu1": soft, "softirq_cpu1_with_cold_runs": cold,
            "receiver_system": recv, "sender_system": send,
            "softirq_cpu1_proc_stat_ticks": ticks}


def wakeup_cost(points: list[dict], soft: dict, background_ns_per_s: float = 0.0) -> dict:
    """CPU 1's softirq time per wake-up of the receiver, from the runs in which it waited
    on its sockets: their softirq time less what ``soft`` gives their packets, per
    voluntary context switch of the receiver (each one a wake-up by CPU 1's
    ``sock_def_readable``, net/core/sock.c)."""
    from rxlab.host.fit import spread
    c, per = soft["coef"], []
    for p in points:
        rest = (p["softirq_ns"] - background_ns_per_s * p["window_s"]
                - (c["ns_per_packet"] + c["ns_per_packet_per_filter"] * p["filters"])
                * p["processed"])
        per.append(rest / max(1, p["recv_wakeups"]))
    s = spread(per)
    sd = (sum((x - s["mean"]) ** 2 for x in per) / (len(per) - 1)) ** 0.5 if len(per) > 1 \
        else 0.0
    return {"ns": round(s["mean"], 1), "se": round(sd / len(per) ** 0.5, 1),
            "min": round(s["min"], 1), "max": round(s["max"], 1),
            "runs": s["n"], "wakeups_per_packet": round(
                sum(p["recv_wakeups"] for p in points)
                / max(1, sum(p["processed"] for p in points)), 4),
            "used": "no"}


def lab_scenario(base: str, costs: dict, pps: float, duration: float = 0.2) -> dict:
    """The calibration lab as a scenario: netif_rx on CPU 0, RPS to CPU 1, the
    receiving process on CPU 0, 8 flows. The lab's receiver reads on a timer, so CPU 1
    never wakes it: ``wakeup_remote`` 0 (the model's reader sleeps when its socket is
    empty)."""
    from rxlab.kcheck import model
    d = model.scenario([model.group("flows", FLOWS, pps)], {"rps_cpus": "2"},
                       app_cpu=APP_CPU, duration=duration,
                       costs={**costs, "wakeup_remote": 0.0})
    d["host"]["cost_profile"] = base
    return d


def model_softirq_per_packet(base: str, costs: dict, pps: float) -> float:
    from rxlab.kcheck import model
    d = lab_scenario(base, costs, pps)
    res = model.simulate(d)
    cpu = res.data["cpus"][TARGET_CPU]
    proc = cpu["softnet_stat"]["processed"]
    return cpu["util"]["softirq"] * d["duration"] * 1e9 / max(proc, 1)


def solve_stack_rx(base: str, c0: float, pps: float) -> dict:
    """``stack_rx`` that makes the model's softirq ns per packet on CPU 1 equal ``c0``:
    the model's time is linear in it, so two runs give the line and a third checks it."""
    from rxlab.profiles import stage_costs
    g1 = stage_costs(base, {})["stack_rx"]
    m1 = model_softirq_per_packet(base, {"stack_rx": g1}, pps)
    g2 = g1 + 500.0
    m2 = model_softirq_per_packet(base, {"stack_rx": g2}, pps)
    slope = (m2 - m1) / (g2 - g1) if m2 != m1 else 1.0
    g = max(0.0, g1 + (c0 - m1) / slope)
    m = model_softirq_per_packet(base, {"stack_rx": g}, pps)
    return {"stack_rx": g, "model_ns_per_packet": m, "other_stages_ns": m - g,
            "load_pps": pps}


def as_rate_runs(points: list[dict]) -> list[dict]:
    """Calibration runs under the names the rate checks' model replica reads."""
    return [{"send_seconds": p["send_seconds"], "sent": p["sent"],
             "sent_pps": p["sent"] / max(p["send_seconds"], 1e-3),
             "sender_sleeps": p["send_sleeps"], "sender_slept_s": p["send_slept_s"],
             "received": p["received"], "receiver_utime_ns": p["recv_utime_ns"],
             "receiver_stime_ns": p["recv_stime_ns"]} for p in points]


def solve_wakeup_remote(model_prof: dict, points: list[dict],
                        background_ns_per_s: float, first: float) -> dict:
    """The lab of the waiting-receiver runs (their filters, rate, bursts, the receiver's
    pace) in the model: first the delay from wake-up to read (``wakeup_latency``) with
    which the model's reader is woken as often per packet as the kernel's receiver
    (bisection: fewer wake-ups the longer it takes to come and read); then, with it,
    ``wakeup_remote`` that makes the model's softirq ns per packet on CPU 1 equal the
    kernel's (nearly linear in it: two runs give the line, a third checks it, and
    corrects it once when it is off by more than 1 %)."""
    from rxlab.kcheck import rates
    n = points[0]["filters"]
    runs = as_rate_runs(points)
    target = (sum(p["softirq_ns"] - background_ns_per_s * p["window_s"] for p in points)
              / max(1, sum(p["processed"] for p in points)))
    wakes = (sum(p["recv_wakeups"] for p in points)
             / max(1, sum(p["processed"] for p in points)))

    def per_packet(g: float, delay: float | None) -> tuple[float, dict]:
        prof = {**model_prof, "costs": {**model_prof.get("costs", {}), "wakeup_remote": g},
                "receiver_wake_delay_ns": delay}
        m = rates.model_like(prof, n, runs, waking=True, flows=FLOWS)
        return m["softirq_share"] / max(m["processed_pps"], 1e-9) * 1e9, m

    def wakes_per_packet(delay: float) -> float:
        m = per_packet(first, delay)[1]
        return m["receiver_wakeups_remote"] / max(1.0, m["processed_pps"] * m["seconds"])

    lo, hi = 0.0, WAKE_DELAY_MAX_NS
    tried = {lo: wakes_per_packet(lo)}
    if tried[lo] <= wakes:
        hi = lo
    for _ in range(WAKE_DELAY_STEPS):
        if hi - lo < 100.0:
            break
        mid = round((lo + hi) / 2, -2)
        tried[mid] = wakes_per_packet(mid)
        lo, hi = (mid, hi) if tried[mid] > wakes else (lo, mid)
    # the count moves in steps (evenly spaced packets in every burst wake the reader the
    # same whole number of times per burst): the delay that came closest
    delay = min(tried, key=lambda x: (abs(tried[x] - wakes), x))
    m1, _ = per_packet(0.0, delay)
    g2 = max(first, 1000.0)
    m2, _ = per_packet(g2, delay)
    slope = (m2 - m1) / g2
    g = max(0.0, (target - m1) / slope) if slope > 0 else first
    m, last = per_packet(g, delay)
    if slope > 0 and abs(m - target) > 0.01 * target:
        # the wake-ups' own count moves a little with their cost: one secant step more
        g = max(0.0, g + (target - m) / slope)
        m, last = per_packet(g, delay)
    return {"wakeup_remote": g, "receiver_wake_delay_ns": delay,
            "kernel_wakeups_per_packet": wakes,
            "kernel_ns_per_packet": target, "model_ns_per_packet": m,
            "model_ns_per_packet_without": m1,
            "model_wakeups_per_packet": last["receiver_wakeups_remote"]
            / max(1.0, last["processed_pps"] * last["seconds"]), "filters": n}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _fmt(fit: dict, key: str) -> str:
    return (f"{fit['coef'][key]:.1f} +- {fit['se'][key]:.1f} ns (standard error; least "
            f"squares over {fit['n']} runs, R^2 {fit['r2']:.3f})")


def handoff_stage(runs: list[dict], stages: dict, where: str) -> dict | None:
    """``ipi_latency`` from the hand-off runs: the median over the runs of each run's
    median hand-off (netif_rx on CPU 0 to __netif_receive_skb_core on CPU 1, CPU 1 idle
    in between), less the stages the model charges on the same path (``ipi_send`` on
    CPU 0, ``ipi_recv`` on CPU 1). None without enough hand-offs."""
    meds = sorted(r["median"] for r in runs if r.get("n", 0) >= 100 and r.get("median"))
    if not meds:
        return None
    med = meds[len(meds) // 2]
    other = stages["ipi_send"]["ns"] + stages["ipi_recv"]["ns"]
    spread = ", ".join(f"{r['min'] / 1000:.1f} / {r['median'] / 1000:.1f} / "
                       f"{r['p90'] / 1000:.1f}" for r in runs if r.get("median"))
    return {"ns": round(max(0.0, med - other), 1),
            "source": (f"measured here {where}: the RPS hand-off of single packets at "
                       f"{HANDOFF_PPS} pps, netif_rx on CPU 0 to __netif_receive_skb_core "
                       f"on CPU 1 (raw tracepoints netif_rx, netif_receive_skb), median "
                       f"of {len(meds)} runs' medians {med / 1000:.2f} us (min / median / "
                       f"p90 per run, us: {spread}), less ipi_send + ipi_recv "
                       f"{other:.0f} ns the model charges on the same path")}


def build(meas: dict, plan, base: str = DEFAULT_BASE, hz: int | None = None) -> dict:
    """The profile mapping (``stages`` complete, each with its ``source``)."""
    from rxlab.profiles import load_profile
    f = fits(meas["points"], meas.get("background_ns_per_s", 0.0))
    soft, recv = f["softirq_cpu1"], f["receiver_system"]
    c0 = soft["coef"]["ns_per_packet"]
    plain = [p for p in meas["points"] if p["filters"] == 0 and p["pps_target"]] or \
        meas["points"]
    load = sorted(p["sent"] / max(p["send_seconds"], 1e-3) for p in plain)[len(plain) // 2]
    solved = solve_stack_rx(base, c0, load)
    now = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
    kernel = f"{platform.release()} {platform.version()}"
    cpu = _cpu_model()
    where = f"on {socket.gethostname()} (Linux {platform.release()}, {cpu}), {now.isoformat()}"
    base_prof = load_profile(base)
    stages = {}
    for name, e in base_prof["stages"].items():
        stages[name] = {"ns": float(e["ns"]),
                        "source": f"not measured here: from the {base} profile: {e['source']}"}
    stages["stack_rx"] = {
        "ns": round(solved["stack_rx"], 1),
        "source": (f"measured here {where}: RPS-target softirq time per packet "
                   f"(NET_RX softirq_entry/exit tracepoints vs softnet_stat processed) "
                   f"{_fmt(soft, 'ns_per_packet')}"
                   f", minus {solved['other_stages_ns']:.1f} ns the model spends on the same "
                   f"path in its other stages")}
    rv, rse = recv["coef"]["ns_per_packet"], recv["se"]["ns_per_packet"]
    if rv > 0 and rse < SIGNIFICANT * rv:
        stages["recvmsg"] = {
            "ns": round(rv, 1),
            "source": (f"measured here {where}: receiving process system time per packet "
                       f"read (getrusage, includes its 1 ms timer sleeps) "
                       f"{_fmt(recv, 'ns_per_packet')}")}
    else:
        stages["recvmsg"]["source"] += (
            f" (measured here {_fmt(recv, 'ns_per_packet')}: standard error above "
            f"{SIGNIFICANT:.0%} of the value, not used)")
    wake = (wakeup_cost(meas["wakeup_points"], soft, meas.get("background_ns_per_s", 0.0))
            if meas.get("wakeup_points") else None)
    if wake is not None:
        mprof = {"path": base, "stack_rx": solved["stack_rx"],
                 "u32_filter_ns": soft["coef"]["ns_per_packet_per_filter"],
                 "costs": {"recvmsg": stages["recvmsg"]["ns"]}}
        ws = solve_wakeup_remote(mprof, meas["wakeup_points"],
                                 meas.get("background_ns_per_s", 0.0), wake["ns"])
        wake["model_consistent"] = {k: round(v, 4 if "per_packet" in k and "wakeups" in k
                                             else 1) for k, v in ws.items()}
        wake["used"] = "yes: the profile's wakeup_remote is the model-consistent value"
        stages["wakeup_remote"] = {
            "ns": round(ws["wakeup_remote"], 1),
            "source": (f"measured here {where}: CPU 1's NET_RX softirq time per wake-up of "
                       f"the receiving process on CPU 0 (sock_def_readable -> "
                       f"try_to_wake_up; softirq time beyond the fit, per voluntary context "
                       f"switch) {wake['ns']:.1f} +- {wake['se']:.1f} ns (standard error "
                       f"over {wake['runs']} runs, {ws['filters']} u32 filters, "
                       f"{wake['wakeups_per_packet']:.3f} wake-ups per packet); the value "
                       f"with which the model's softirq time per packet on CPU 1 in the "
                       f"same lab is {ws['model_ns_per_packet']:.1f} ns against the kernel's "
                       f"{ws['kernel_ns_per_packet']:.1f}, its "
                       f"reader woken {ws['model_wakeups_per_packet']:.3f} times per packet "
                       f"(reading {ws['receiver_wake_delay_ns'] / 1000:.1f} us after a "
                       f"wake-up, lab.receiver_wake_delay_ns)")}
    handoff = handoff_stage(meas.get("handoff") or [], stages, where)
    if handoff:
        stages["ipi_latency"] = handoff
    name = "calibrated-" + "".join(ch if ch.isalnum() or ch in "-_." else "-"
                                   for ch in socket.gethostname())
    return {
        "name": name,
        "description": f"per-stage costs measured by rxlab calibrate {where}",
        "measured": {"host": socket.gethostname(), "kernel": kernel, "cpu_model": cpu,
                     "cpus": os.cpu_count(), "date": now.isoformat(), "hz": hz,
                     "base_profile": base,
                     "plan": {"filters": list(plan.filters), "fractions": list(plan.fractions),
                              "repeat": plan.repeat, "duration_s": plan.duration},
                     "runs_fitted": len(meas["points"]),
                     "stages": [s for s, e in stages.items()
                                if e["source"].startswith("measured here")]},
        "stages": stages,
        "lab": {
            "u32_filter_ns": round(soft["coef"]["ns_per_packet_per_filter"], 3),
            "u32_filter_ns_se": round(soft["se"]["ns_per_packet_per_filter"], 3),
            "softirq_ns_per_packet": round(c0, 1),
            "softirq_ns_per_packet_se": round(soft["se"]["ns_per_packet"], 1),
            "calibration_filters": list(plan.filters),
            "background_softirq_ns_per_s": round(meas.get("background_ns_per_s", 0.0), 1),
            "stack_rx_solution": {k: round(v, 1) for k, v in solved.items()},
            "receiver_wakeup_softirq_ns": wake,
            "receiver_wake_delay_ns": (wake["model_consistent"]["receiver_wake_delay_ns"]
                                       if wake else None),
            "fits": {k: {"coef": {c: round(x, 3) for c, x in v["coef"].items()},
                         "se": {c: round(x, 3) for c, x in v["se"].items()},
                         "n": v["n"], "r2": round(v["r2"], 4)} for k, v in f.items()},
            "points": meas["points"],
            "wakeup_points": meas.get("wakeup_points", []),
            "handoff": meas.get("handoff", []),
        },
    }


def write(prof: dict, path: str) -> None:
    """Write atomically, then load it back as ``host.cost_profile`` would."""
    import yaml

    from rxlab.outfiles import write_file
    from rxlab.profiles import load_profile
    m = prof["measured"]
    head = (f"# rxlab calibrate: cost profile measured on {m['host']} ({m['kernel']}; "
            f"{m['cpu_model']}), {m['date']}.\n# Use it with host.cost_profile: {path}\n")
    text = head + yaml.safe_dump(prof, sort_keys=False, width=100)
    # checked as host.cost_profile reads it, under its temporary name, before the rename
    write_file(path, text, "--output", verify=None if path == "-" else load_profile)
