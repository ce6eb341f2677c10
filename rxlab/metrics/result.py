"""Turn a finished model's arrays into the Result (a JSON-able dict plus series)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rxlab.jsonout import dumps
from rxlab.kernel.accounting import hist_value
from rxlab.kernel.counters import (
    ARFS_CNT,
    CNT_BAD_QUEUE,
    CNT_DELIVERED,
    CNT_DROP0,
    CNT_FORWARDED,
    CNT_GOOD_QUEUE,
    CNT_LAT_APP_N,
    CNT_LAT_SOCK_N,
    CNT_OFFERED,
    CNT_REORDERED,
    CNT_XDP_PASS,
    CNT_XDP_REDIRECT,
    CNT_XDP_RUNS,
    CPUMAP_CNT,
    LAT_APP,
    LAT_NIC,
    LAT_SOCK,
    RFS_CNT,
    T_HARDIRQ,
    T_KSOFTIRQD,
    T_SOFTIRQ,
    T_SYSTEM,
    T_USER,
    TS_DELIVERED,
    TS_DROPPED,
    TS_OFFERED,
    TS_PROCESSED,
)
from rxlab.kernel.drop_reasons import DROP_REASONS
from rxlab.metrics.softnet import softnet_lines
from rxlab.metrics.tasks import tasks_block


@dataclass
class Result:
    """What a run reports: ``data`` (the ``--json`` dict) and per-interval ``series``."""

    data: dict
    series: dict = field(default_factory=dict)

    def __getitem__(self, key):
        return self.data[key]

    def to_json(self, **kw) -> str:
        """Valid JSON: a NaN or infinity raises ConservationError (a model bug)."""
        return dumps(self.data, "result", sort_keys=True, **kw)

    @property
    def softnet_stat(self) -> str:
        return "\n".join(self.data["softnet_stat"]) + "\n"


def percentiles(hist: np.ndarray, qs=(0.5, 0.99, 0.999)) -> list[float | None]:
    """Quantiles of a latency histogram; None for an empty one (no such latency)."""
    total = int(hist.sum())
    if total == 0:
        return [None for _ in qs]
    cum = np.cumsum(hist)
    mids = hist_value(np.arange(hist.size))
    return [float(mids[int(np.searchsorted(cum, q * total))]) for q in qs]


def _lat(hist: np.ndarray, total_ns: float, n: int) -> dict:
    """Latency summary; without samples every statistic is None (JSON null), not 0."""
    if n == 0 or not hist.any():
        return {"p50": None, "p99": None, "p999": None, "mean": None, "max": None,
                "samples": n}
    p50, p99, p999 = percentiles(hist)
    nz = np.nonzero(hist)[0]
    return {
        "p50": round(p50, 1), "p99": round(p99, 1), "p999": round(p999, 1),
        "mean": round(total_ns / n, 3),
        "max": round(float(hist_value(nz[-1:])[0]), 1),
        "samples": n,
    }


def cpumap_block(m) -> list[dict]:
    """Per entry: what the xdp:xdp_cpumap_enqueue / xdp_cpumap_kthread tracepoints sum to."""
    out = []
    for e, cpu in enumerate(m.params.cpumap["cpu"]):
        row = {k: int(m.cm.cnt[e][k]) for k in CPUMAP_CNT}
        frames = row["enqueued"] + row["enqueue_drops"]
        row["bulk_average"] = round(frames / row["flushes"], 3) if row["flushes"] else 0
        out.append({"cpu": int(cpu), "qsize": int(m.params.cpumap[e]["qsize"]), **row,
                    "ring_len": int(m.cm.entry[e]["prod"] - m.cm.entry[e]["cons"])})
    return out


def _cpus_block(m) -> tuple[list[dict], list[dict]]:
    """Per CPU: its time shares and softnet_stat counters (``cpus``), and the softnet
    rows the softnet_stat lines are printed from."""
    p, sd = m.params, m.sd
    # CPU shares of the traffic window [0, p.win_ns) (rxlab.build.traffic_window_ns):
    # only the time charged inside it, not the segments running on past its end
    busy = m.st.win_cpu.astype(np.float64)  # [ncpu, cat]
    cpus = []
    softnet_rows = []
    for c in range(p.ncpu):
        b = busy[c] / p.win_ns
        soft = float(b[T_SOFTIRQ] + b[T_KSOFTIRQD])
        used = soft + float(b[T_HARDIRQ] + b[T_SYSTEM] + b[T_USER])
        r = sd.cpu[c]  # CPU c's struct softnet_data
        inq = int(r["bl_tail"] - r["bl_proc"])
        prq = int(r["bl_proc"] - r["bl_head"])
        row = {
            "cpu": c, "processed": int(r["processed"]), "dropped": int(r["dropped"]),
            "time_squeeze": int(r["time_squeeze"]), "received_rps": int(r["received_rps"]),
            "flow_limit_count": int(r["flow_limit_count"]), "backlog_len": inq + prq,
            "input_pkt_queue_len": inq, "process_queue_len": prq,
        }
        softnet_rows.append(row)
        cpus.append({
            "cpu": c,
            "util": {
                "softirq": round(soft, 6), "ksoftirqd": round(float(b[T_KSOFTIRQD]), 6),
                "irq": round(float(b[T_HARDIRQ]), 6), "system": round(float(b[T_SYSTEM]), 6),
                "user": round(float(b[T_USER]), 6), "idle": round(max(0.0, 1.0 - used), 6),
            },
            "softnet_stat": {k: v for k, v in row.items() if k != "cpu"},
        })
    return cpus, softnet_rows


def _queues_block(m) -> list[dict]:
    """Per rx queue: its interrupt CPU, packets, ring-full drops, polls and interrupts."""
    p, nic = m.params, m.nic
    return [
        {"queue": q, "irq_cpu": int(p.queue[q]["irq_cpu"]),
         "packets": int(nic.queue[q]["q_packets"]),
         "ring_full_drops": int(nic.queue[q]["q_drops"]), "polls": int(nic.queue[q]["q_polls"]),
         "irqs": int(nic.queue[q]["q_irqs"]), "timer_polls": int(nic.queue[q]["q_timer_polls"]),
         "empty_polls": int(nic.queue[q]["q_empty_polls"]),
         # threaded NAPI: the queue's kthread napi/DEV-ID, its CPU and CPU time
         **({"napi_thread_cpu": int(p.queue[q]["napi_cpu"]),
             "napi_thread_cpu_s": round(int(nic.thread[q]["nt_ns"]) / 1e9, 9)}
            if p.napi_threaded else {}),
         **({"busy_poll_packets": int(nic.queue[q]["q_bp_pkts"])} if p.busy_poll_on else {})}
        for q in range(p.nq)
    ]


def _apps_block(m) -> list[dict]:
    """Per application thread: packets served, socket drops and wakeups."""
    so, dur = m.so, m.scenario.duration
    apps = []
    for t, (name, cpu) in enumerate(m.threads):
        apps.append({"app": name, "cpu": cpu, "served": int(so.thread["th_served"][t]),
                     "served_pps": round(int(so.thread["th_served"][t]) / dur, 3),
                     "socket_drops": int(so.sock["so_drops"][t]),
                     "wakeups": int(so.thread["th_wakeups"][t]),
                     "wakeups_remote": int(so.thread["th_wakeups_remote"][t])})
        if m.params.busy_poll_on:
            apps[-1].update(busy_poll_packets=int(so.thread["th_bp_pkts"][t]),
                            busy_poll_s=round(int(so.thread["th_bp_ns"][t]) / 1e9, 9))
    return apps


def _latency_block(st) -> dict:
    """To the socket (its statistics also at the top), to the application, NIC wait."""
    cnt = st.cnt
    lat_sock = _lat(st.lat_sock, float(st.lat_sum[LAT_SOCK]), int(cnt[CNT_LAT_SOCK_N]))
    lat_app = _lat(st.lat_app, float(st.lat_sum[LAT_APP]), int(cnt[CNT_LAT_APP_N]))
    # the NIC's FIFO at its packet-rate ceiling (nic.max_pps): wire arrival to service
    lat_nic = _lat(st.lat_nic, float(st.lat_sum[LAT_NIC]), int(st.lat_nic.sum()))
    return {**{k: lat_sock[k] for k in ("p50", "p99", "p999", "mean")},
            "to_socket": lat_sock, "to_app": lat_app, "nic_wait": lat_nic}


def _flows_by_group(m) -> dict:
    """Per traffic group: its flows and the packets they offered and had delivered."""
    fl, so = m.flows, m.so
    by_group = {}
    for g, gname in enumerate(fl.group_names):
        rows = fl.rows(g)
        by_group[gname] = {
            "flows": rows.stop - rows.start,
            "offered": int(so.flow["flow_next_seq"][rows].sum()),
            "delivered": int(so.flow["flow_delivered"][rows].sum()),
        }
    return by_group


def _packets_block(cnt, drops: dict, in_flight: int) -> dict:
    """Packets offered, delivered, dropped (and why), forwarded and still in flight."""
    return {
        "offered": int(cnt[CNT_OFFERED]), "delivered": int(cnt[CNT_DELIVERED]),
        "dropped": int(sum(drops.values())),
        "forwarded": int(cnt[CNT_FORWARDED]), "in_flight": in_flight,
        "dropped_by_reason": drops,
    }


def _throughput_block(m) -> dict:
    """Rates over duration_s (the traffic, not the drain)."""
    cnt, dur = m.st.cnt, m.scenario.duration
    return {
        "offered_pps": round(int(cnt[CNT_OFFERED]) / dur, 3),
        "delivered_pps": round(int(cnt[CNT_DELIVERED]) / dur, 3),
        "processed_pps": round(int(m.sd.cpu["processed"].sum()) / dur, 3),
    }


def _steering_block(m) -> dict:
    """Arrivals on a queue whose interrupt CPU runs the consumer, and elsewhere; moves."""
    cnt = m.st.cnt
    return {
        "good_queue_packets": int(cnt[CNT_GOOD_QUEUE]),
        "bad_queue_packets": int(cnt[CNT_BAD_QUEUE]),
        "thread_migrations": int(m.so.thread["th_migrations"].sum()),
    }


def _arfs_block(m) -> dict:
    """The aRFS counters without their prefix, and the filters left in the NIC."""
    return {**{k.removeprefix("arfs_"): int(m.ar.cnt[0][k]) for k in ARFS_CNT},
            "filters_in_hw": int(m.ar.glob[0]["hw_count"])}


def _mechanism_blocks(m, drops: dict) -> dict:
    """``tcp``, ``xdp`` and ``cpumap``, each only when the scenario has it."""
    sc, cnt, so = m.scenario, m.st.cnt, m.so
    out = {}
    if so.sock["sock_tcp"].any():  # where TCP packets were processed (rxlab.kernel.socket)
        out["tcp"] = {k: int(so.sock[f][so.sock["sock_tcp"] == 1].sum()) for k, f in (
            ("local", "tcp_local"), ("remote", "tcp_remote_n"), ("backlog", "tcp_backlog_n"),
            ("out_of_order", "tcp_ofo_n"))}
    if sc.xdp is not None:
        out["xdp"] = {"runs": int(cnt[CNT_XDP_RUNS]), "pass": int(cnt[CNT_XDP_PASS]),
                      "drop": drops["xdp_drop"], "aborted": drops["xdp_aborted"],
                      "tx": int(cnt[CNT_FORWARDED]), "redirect": int(cnt[CNT_XDP_REDIRECT])}
    if sc.cpumap is not None:
        out["cpumap"] = cpumap_block(m)
    return out


def _series(m) -> dict:
    """Per interval: packet rates, CPU busy and softirq shares; the latency histograms."""
    p, st = m.params, m.st
    isec = p.interval_ns / 1e9
    return {
        "t_s": (np.arange(p.n_intervals) * isec).tolist(),
        "offered_pps": (st.ts_pkt[:, TS_OFFERED] / isec).tolist(),
        "delivered_pps": (st.ts_pkt[:, TS_DELIVERED] / isec).tolist(),
        "dropped_pps": (st.ts_pkt[:, TS_DROPPED] / isec).tolist(),
        "processed_pps": (st.ts_pkt[:, TS_PROCESSED] / isec).tolist(),
        "cpu_busy": (st.ts_cpu.sum(axis=2) / p.interval_ns).tolist(),  # [t][cpu]
        "cpu_softirq": ((st.ts_cpu[:, :, T_SOFTIRQ] + st.ts_cpu[:, :, T_KSOFTIRQD])
                        / p.interval_ns).tolist(),
        "latency_hist_app": st.lat_app.tolist(),
        "latency_hist_socket": st.lat_sock.tolist(),
        "latency_hist_nic_wait": st.lat_nic.tolist(),
    }


def assemble(m, in_flight: int) -> Result:
    """The Result of a finished model ``m``: the ``--json`` dict, its blocks in this
    order, and the series. ``in_flight``: the packets still inside the model at its end."""
    sc, cnt = m.scenario, m.st.cnt
    drops = {name: int(cnt[CNT_DROP0 + i]) for i, name in enumerate(DROP_REASONS)}
    cpus, softnet_rows = _cpus_block(m)
    data = {
        "scenario": sc.name,
        "seed": sc.seed,
        "duration_s": sc.duration,
        "kernel": sc.host.kernel,
        "config": m.config,
        "packets": _packets_block(cnt, drops, in_flight),
        "throughput": _throughput_block(m),
        "cpus": cpus,
        "queues": _queues_block(m),
        "apps": _apps_block(m),
        "tasks": tasks_block(m),
        "latency_ns": _latency_block(m.st),
        "reordered_packets": int(cnt[CNT_REORDERED]),
        "flows_by_group": _flows_by_group(m),
        "steering": _steering_block(m),
        "rfs": {k: int(m.rf.cnt[0][k]) for k in RFS_CNT},
        "arfs": _arfs_block(m),
        "softnet_stat": softnet_lines(softnet_rows, m.kb.softnet_columns),
        "notices": list(m.notices),  # e.g. a longer series interval than asked
    }
    data.update(_mechanism_blocks(m, drops))
    return Result(data, _series(m))
