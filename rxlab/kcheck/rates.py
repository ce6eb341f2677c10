"""Rate and load checks against a calibrated profile (``kernel-check --profile P``).

The profile (``rxlab calibrate``) gives the host's per-packet softirq cost on the RPS
target and the lab's slowdown per tc u32 filter, fitted on runs with 0, 800 and 1600
filters at the sender's full rate and at paced loads. These checks run configurations the
calibration did not use, each ``repeat`` times (at least 3), and score the model on
them only (filter counts between the calibration's, so the fit interpolates; loads
the calibration did not pace at):

* ``backlog_saturation``: 1200 filters, the sender unpaced (far above what CPU 1 can
  process): packets CPU 1 gets through its backlog per second of CPU time in the
  receive softirq, i.e. the saturation rate of one whole CPU (the share of CPU 1 the
  softirq got is reported: the rest went to other work on this machine, which the
  model does not know about);
* ``softirq_half_load``: 1000 filters, paced at half the model's saturation rate:
  the share of CPU 1 spent in the receive softirq;
* ``overload_drops``: 1400 filters, paced at 1.5 times the model's saturation rate:
  the share of the packets enqueued for CPU 1 that its backlog drops;
* ``softirq_half_load_waking``: ``softirq_half_load``'s lab and load with the receiver
  waiting on its sockets (``select()``), so CPU 1's softirq wakes it on CPU 0
  (``sock_def_readable`` -> ``try_to_wake_up``): the share of CPU 1 spent in the
  receive softirq, wake-ups included (the profile's ``wakeup_remote``; the calibration
  measured it with 800 filters at another load). The model's receiver reads at the
  pace the kernel's did: its user and system time per packet are the Python
  receiver's (getrusage), and like it, it sleeps whenever its socket is empty. The
  receiver's wake-ups (voluntary context switches) and the model's are reported.

The calibration's lab with 16 connected flows instead of 8: sender and receiving process on
CPU 0, ``rps_cpus=2`` on every rx queue (CPU 1 does only the receive softirq),
``netdev_max_backlog`` 1000, the receiver reading every 1 ms rather than waiting on its
sockets except in the waking check (as in the calibration: the receive path's cost is
checked apart from the wake-ups; a wake-up is several microseconds of CPU 1's softirq in
a VM). In the waking check the model's reader runs the calibration's
``receiver_wake_delay_ns`` after its wake-up (``wakeup_latency``: the delay with which it
was woken as often per packet as the Python receiver). A receiver on a timer is woken
by its own CPU's timer, never by CPU 1: its model has ``wakeup_remote`` 0 (the model's
reader sleeps whenever its socket is empty and would otherwise be woken by CPU 1). The
kernel side measures CPU 1's
NET_RX softirq time with the softirq_entry/exit tracepoints, softnet_stat and
/proc/stat (all in the JSON, with the receiver's wake-ups and the sender's sleeps);
ksoftirqd/1 runs at SCHED_FIFO during the runs (``guard.ksoftirqd_fifo``: the model's
CPU 1 has nothing else to run). The model is the same scenario with
``host.cost_profile`` = the profile and ``stack_rx`` raised by the filters' cost per
packet; its inputs are the kernel's: the mean sent rate and sending time, and the paced
sender's bursts (``arrivals``). Both sides count the softirq time and the softnet
counters over the whole run, the drain after the traffic included. A check agrees when
the model lies within the kernel's range over the repetitions widened by ``TOLERANCE``
of the kernel's mean.

Latency percentiles are not checked: the kernel timestamps a veth packet
(``net_timestamp_check`` in ``netif_rx_internal``) before the backlog, and the only
later time the lab can read is the Python receiver's own, which adds its scheduling
and interpreter delay (tens of microseconds, noisy) to what the model predicts.
"""

from __future__ import annotations

from rxlab.host import guard
from rxlab.host.experiment import RECV_NAP, SoftirqTimer, run_traffic, slow_consumer
from rxlab.host.fit import spread, within
from rxlab.kcheck import model

TOLERANCE = 0.12
FLOWS = list(range(40500, 40516))
SEND_CPU, TARGET_CPU, APP_CPU = 0, 1, 0
FILTERS = {"softirq_half_load": 1000, "backlog_saturation": 1200, "overload_drops": 1400,
           "softirq_half_load_waking": 1000}
LATENCY_NOT_CHECKED = ("latency percentiles: not checked; the lab's only timestamp after "
                       "the backlog is the Python receiver's read time, which adds its own "
                       "scheduling delay")


def load(path: str) -> dict:
    """The calibrated profile: validated as ``host.cost_profile`` and with the lab
    figures these checks need."""
    from rxlab.errors import UsageError
    from rxlab.inputs import parse_yaml, read_text
    from rxlab.profiles import load_profile
    try:
        load_profile(path)
    except UsageError as err:
        raise UsageError(f"--profile: {str(err).removeprefix('host.cost_profile: ')}") \
            from None
    data = parse_yaml(read_text(path, "cost profile"), path)
    lab = data.get("lab") if isinstance(data, dict) else None
    if not isinstance(lab, dict) or "u32_filter_ns" not in lab:
        raise UsageError(f"--profile: {path} has no 'lab' section with u32_filter_ns: "
                         "give a profile written by rxlab calibrate")
    used = set(lab.get("calibration_filters", []))
    clash = sorted(n for n in FILTERS.values() if n in used)
    if clash:
        raise UsageError(f"--profile: {path} was fitted on {clash} u32 filters, the "
                         "configurations these checks hold out; calibrate again")
    return {"path": path, "stack_rx": float(data["stages"]["stack_rx"]["ns"]),
            "ipi_recv": float(data["stages"]["ipi_recv"]["ns"]),
            "wakeup_remote": float(data["stages"]["wakeup_remote"]["ns"]),
            "u32_filter_ns": float(lab["u32_filter_ns"]),
            "receiver_wake_delay_ns": lab.get("receiver_wake_delay_ns"),
            "measured": data.get("measured", {})}


def arrivals(runs: list[dict]) -> dict | None:
    """The paced sender's bursts (traffic.py: it sends at its full rate until it is
    0.5 ms ahead of the schedule, then sleeps) as the model's on/off arrivals: per
    sleep one cycle, ON for the time it sent, at the rate it sent; None when it never
    slept (unpaced)."""
    sleeps = sum(r["sender_sleeps"] for r in runs)
    if not sleeps:
        return None
    secs = sum(r["send_seconds"] for r in runs)
    slept = sum(r["sender_slept_s"] for r in runs)
    on = max(secs - slept, 1e-3 * secs)  # timing noise cannot make it vanish
    return {"on_s": on / sleeps, "off_s": slept / sleeps,
            "on_pps": sum(r["sent"] for r in runs) / on}


def scenario(prof: dict, n_filters: int, pps: float, duration: float = 0.3,
             shape: dict | None = None, reader: dict | None = None,
             flows: list[int] = FLOWS) -> dict:
    """The lab; the filters' cost per packet added to ``stack_rx``. ``shape``: the
    sender's bursts (``arrivals``), else Poisson arrivals at ``pps``. ``reader``: the
    receiver waits on its socket, reading at the kernel receiver's pace ({"user_ns",
    "system_ns"} per packet); None: it reads on a timer, and CPU 1 never wakes it.
    ``prof["costs"]``: further stage costs (the calibration's, before its file exists)."""
    costs = dict(prof.get("costs", {}))
    costs["stack_rx"] = prof["stack_rx"] + n_filters * prof["u32_filter_ns"]
    if reader is None:
        costs["wakeup_remote"] = 0.0
    g = model.group("flows", flows, pps)
    if shape:
        g["rate"]["pps"] = shape["on_pps"]
        g["arrivals"] = {"process": "onoff", "on_s": shape["on_s"], "off_s": shape["off_s"],
                         "within": "constant"}
    d = model.scenario([g], {"rps_cpus": "2"}, app_cpu=APP_CPU, duration=duration,
                       costs=costs)
    d["host"]["cost_profile"] = prof["path"]
    if reader is not None:
        d["apps"][0]["cost"] = {"user_ns": reader["user_ns"], "syscall_ns": reader["system_ns"]}
        if prof.get("receiver_wake_delay_ns") is not None:
            d["host"]["costs"]["wakeup_latency"] = float(prof["receiver_wake_delay_ns"])
    return d


def model_run(prof: dict, n_filters: int, pps: float, duration: float = 0.3,
              shape: dict | None = None, reader: dict | None = None,
              flows: list[int] = FLOWS) -> dict:
    """The model's figures, measured as the kernel's are: softirq time and softnet
    counters over the whole run, the drain after the traffic included."""
    d = scenario(prof, n_filters, pps, duration, shape, reader, flows)
    res = model.simulate(d)
    sn = res.data["cpus"][TARGET_CPU]["softnet_stat"]
    soft = (sum(row[TARGET_CPU] for row in res.series["cpu_softirq"])
            * res.data["config"]["interval_s"])
    return {"processed_pps": sn["processed"] / duration,
            "pps_per_cpu_second": sn["processed"] / max(soft, 1e-9),
            "softirq_share": soft / duration,
            "drop_fraction": sn["dropped"] / max(1, sn["processed"] + sn["dropped"]),
            "offered_pps": pps, "ipis": sn["received_rps"],
            "time_squeeze": sn["time_squeeze"], "seconds": duration,
            "sender_bursts": shape, "receiver_wakeups": res.data["apps"][0]["wakeups"],
            "receiver_wakeups_remote": res.data["apps"][0]["wakeups_remote"],
            "receiver": reader}


def model_capacity(prof: dict, n_filters: int) -> float:
    """The model's CPU 1 saturation rate: packets per CPU-second at 3 times its cost."""
    per = prof["stack_rx"] + n_filters * prof["u32_filter_ns"] + 1000.0
    return model_run(prof, n_filters, 3e9 / per)["pps_per_cpu_second"]


def reader_pace(runs: list[dict]) -> dict:
    """The kernel receiver's own user and system time per packet it read (getrusage)."""
    n = max(1, sum(r["received"] for r in runs))
    return {"user_ns": sum(r["receiver_utime_ns"] for r in runs) / n,
            "system_ns": sum(r["receiver_stime_ns"] for r in runs) / n}


def model_like(prof: dict, n_filters: int, runs: list[dict], waking: bool = False,
               flows: list[int] = FLOWS) -> dict:
    """The model of the kernel's runs: their mean sent rate and sending time, and the
    sender's bursts; ``waking``: the receiver waits on its socket at the kernel's pace."""
    secs = spread([r["send_seconds"] for r in runs])["mean"]
    return model_run(prof, n_filters, spread([r["sent_pps"] for r in runs])["mean"],
                     duration=round(secs, 3), shape=arrivals(runs),
                     reader=reader_pace(runs) if waking else None, flows=flows)


def kernel_runs(ctx, n_filters: int, pps: float | None, nap: float = RECV_NAP) -> list[dict]:
    """``ctx.repeat`` runs of the lab with ``n_filters`` filters; ``nap`` 0: the
    receiver waits on its sockets."""
    ctx.configure(rps_cpus="2")
    ctx.lab.add_clsact(ctx.lab.ns_rx, ctx.lab.dev_rx)
    slow_consumer(n_filters, ctx.lab)
    timer = SoftirqTimer()
    out = []
    try:
        with guard.ksoftirqd_fifo(TARGET_CPU) as fifo:
            for i in range(ctx.repeat):
                ctx.log(f"  {n_filters} u32 filters, "
                        f"{'unpaced' if not pps else f'{pps / 1000:.1f} kpps'}, run {i + 1}")
                a = timer.read()
                run = run_traffic(ctx.lab, FLOWS, duration=ctx.duration, send_cpu=SEND_CPU,
                                  recv_cpu=APP_CPU, pps=pps, nap=nap)
                b = timer.read()
                soft = b.get(TARGET_CPU, {}).get("ns", 0) - a.get(TARGET_CPU, {}).get("ns", 0)
                nruns = (b.get(TARGET_CPU, {}).get("runs", 0)
                         - a.get(TARGET_CPU, {}).get("runs", 0))
                sn = run.softnet.get(TARGET_CPU, {})
                ticks = run.cpu_ticks.get(TARGET_CPU, {})
                secs = max(run.send_seconds, 1e-3)
                out.append({"sent_pps": run.total_sent / secs,
                            "processed_pps": sn.get("processed", 0) / secs,
                            "dropped": sn.get("dropped", 0),
                            "drop_fraction": sn.get("dropped", 0)
                            / max(1, sn.get("processed", 0) + sn.get("dropped", 0)),
                            "softirq_share": soft / (secs * 1e9),
                            "pps_per_cpu_second": sn.get("processed", 0) / max(soft * 1e-9,
                                                                               1e-6),
                            "softirq_ns_per_packet": soft / max(1, sn.get("processed", 0)),
                            "softirq_ns": soft, "softirq_runs": nruns,
                            "processed": sn.get("processed", 0),
                            "ipis": sn.get("received_rps", 0),
                            "time_squeeze": sn.get("time_squeeze", 0),
                            "window_s": run.window, "send_seconds": run.send_seconds,
                            "cpu1_ticks": {k: ticks.get(k, 0) for k in
                                           ("user", "system", "irq", "softirq", "steal",
                                            "idle")},
                            "sent": run.total_sent,
                            "receiver_wakeups": run.recv_rusage.get("nvcsw", 0),
                            "received": sum(run.received.values()),
                            "receiver_utime_ns": run.recv_rusage.get("utime", 0.0) * 1e9,
                            "receiver_stime_ns": run.recv_rusage.get("stime", 0.0) * 1e9,
                            "sender_sleeps": run.send_pacing.get("sleeps", 0),
                            "sender_slept_s": run.send_pacing.get("slept", 0.0),
                            "ksoftirqd_fifo": fifo["changed"]})
    finally:
        timer.close()
        ctx.lab.reset_device()
    return out


def _rounded(v):
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return round(v, 4) if isinstance(v, float) else v


def _result(name: str, n_filters: int, key: str, runs: list[dict], mdl: dict,
            extra_ok: tuple[str, bool] | None = None) -> dict:
    k = spread([r[key] for r in runs])
    ok = within(mdl[key], k, TOLERANCE)
    rnd = {a: round(b, 4) for a, b in k.items() if a != "n"}
    crit = [{"what": f"{key}: model within the kernel's range over {k['n']} runs "
                     f"+- {TOLERANCE:.0%} of its mean", "ok": ok,
             "kernel": rnd, "model": round(mdl[key], 4)}]
    if extra_ok:
        crit.append({"what": extra_ok[0], "ok": extra_ok[1], "kernel": None, "model": None})
    bad = [c["what"] for c in crit if not c["ok"]]
    return {"name": name, "status": "ran", "agree": not bad,
            "reason": "all criteria hold" if not bad else "disagree: " + "; ".join(bad),
            "criteria": crit,
            "kernel": {"u32_filters": n_filters, key: rnd,
                       "runs": [_rounded(r) for r in runs]},
            "model": {k_: _rounded(v) for k_, v in mdl.items()} | {
                "tolerance": TOLERANCE, "held_out": "u32 filter count and load not used "
                                                    "by the calibration"}}


def backlog_saturation(ctx) -> dict:
    n = FILTERS["backlog_saturation"]
    runs = kernel_runs(ctx, n, None)
    mdl = model_like(ctx.profile, n, runs)
    sat = all(r["dropped"] > 0 for r in runs) and mdl["drop_fraction"] > 0
    return _result("backlog_saturation", n, "pps_per_cpu_second", runs, mdl,
                   ("CPU 1 saturated (backlog drops) in every kernel run and in the model",
                    sat))


def softirq_half_load(ctx) -> dict:
    n = FILTERS["softirq_half_load"]
    pps = 0.5 * model_capacity(ctx.profile, n)
    runs = kernel_runs(ctx, n, pps)
    mdl = model_like(ctx.profile, n, runs)
    return _result("softirq_half_load", n, "softirq_share", runs, mdl)


def overload_drops(ctx) -> dict:
    n = FILTERS["overload_drops"]
    pps = 1.5 * model_capacity(ctx.profile, n)
    runs = kernel_runs(ctx, n, pps)
    mdl = model_like(ctx.profile, n, runs)
    return _result("overload_drops", n, "drop_fraction", runs, mdl)


def softirq_half_load_waking(ctx) -> dict:
    n = FILTERS["softirq_half_load_waking"]
    pps = 0.5 * model_capacity(ctx.profile, n)
    runs = kernel_runs(ctx, n, pps, nap=0.0)
    mdl = model_like(ctx.profile, n, runs, waking=True)
    res = _result("softirq_half_load_waking", n, "softirq_share", runs, mdl)
    # the receiver's wake-ups: its voluntary context switches against the model's count
    k = spread([r["receiver_wakeups"] / max(r["send_seconds"], 1e-3) for r in runs])
    m = mdl["receiver_wakeups"] / mdl["seconds"]
    rnd = {a: round(b, 1) for a, b in k.items() if a != "n"}
    ok = within(m, k, TOLERANCE)
    res["criteria"].append({"what": f"receiver wake-ups per second: model within the "
                                    f"kernel's range over {k['n']} runs +- {TOLERANCE:.0%} "
                                    f"of its mean", "ok": ok, "kernel": rnd,
                            "model": round(m, 1)})
    res["kernel"]["receiver_wakeups_per_s"] = rnd
    res["model"]["receiver_wakeups_per_s"] = round(m, 1)
    if not ok:
        bad = [c["what"] for c in res["criteria"] if not c["ok"]]
        res.update(agree=False, reason="disagree: " + "; ".join(bad))
    return res


CHECKS = {"backlog_saturation": backlog_saturation, "softirq_half_load": softirq_half_load,
          "overload_drops": overload_drops,
          "softirq_half_load_waking": softirq_half_load_waking}
