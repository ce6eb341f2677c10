"""The simulations behind ``rxlab tune``: every setting on several traffic seeds, in parallel.

A *run* is one simulation of the scenario with some overrides, on one of

* ``seed N`` (synthetic flows): the scenario's own traffic with seed N, so both the
  flows' addresses (hence their RSS hashes) and the packet times are drawn anew;
* ``seed N`` (captured flows, ``--pcap``): the capture's flows (their real 5-tuples and
  their captured rates), with packet times drawn anew from seed N (Poisson arrivals at
  each flow's captured rate, the capture's mean frame size);
* ``capture``: the capture replayed packet by packet, as captured.

Each run also reports, per flow, what the drop analysis needs: the elephant flows (the
heaviest flow, and every flow holding at least ``ELEPHANT_SHARE`` of its rx queue's
packets) with their queue, IRQ CPU and consumer thread, and the packets offered to and
delivered from the other flows (the victims).

Runs go to local processes forked from the sweep's forkserver (``rxlab.sweep.runner``),
so the compiled loop is loaded once; ``jobs=1`` runs them in this process.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

ELEPHANT_SHARE = 0.25  # of its rx queue's packets
CAPTURE = "capture"


def run_one(task: dict) -> dict:
    """Simulate one run (in a worker process or here)."""
    from rxlab._cache import announce_compile
    from rxlab.build import build
    from rxlab.kernel.rx_loop import feed, feed_end, shape
    from rxlab.kernel.sim import sim_of
    from rxlab.metrics.result import assemble
    from rxlab.scenario import Scenario
    from rxlab.simulate import check_conservation, in_flight
    from rxlab.traffic.stream import PacketStream

    sc = Scenario.model_validate(task["scenario"])
    cap = None
    if sc.traffic.pcap is not None:
        from rxlab.capture.pcap import PcapStream, open_capture

        cap = open_capture(sc.traffic.pcap.file, speedup=sc.traffic.pcap.speedup,
                           allow_truncated=sc.traffic.pcap.allow_truncated)
    m = build(sc, capture=cap)
    if cap is not None and task["mode"] == CAPTURE:
        stream = PcapStream(cap, sc.duration)
    elif cap is not None:
        spec = _seeded_spec(cap)
        from rxlab.traffic.flows import build_flows

        stream = PacketStream(spec, build_flows(spec, sc.seed), sc.seed, sc.duration)
    else:
        stream = PacketStream(sc.traffic, m.flows, sc.seed, sc.duration)
    # the loop of rxlab.simulate.run_model, counting packets offered per flow
    ps_per_byte = int(round(8000.0 / sc.nic.link_gbps))
    svc_ns = int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0
    announce_compile()
    sim = sim_of(m)
    offered = np.zeros(len(m.flows), np.int64)
    for chunk in stream.chunks(1 << 18):
        n = len(chunk)
        t_wire = np.empty(n, np.int64)
        t_nic = np.empty(n, np.int64)
        overrun = np.empty(n, np.bool_)
        shape(chunk.t_ns, chunk.size, ps_per_byte, svc_ns, sc.nic.nic_fifo, m.port_state,
              t_wire, t_nic, overrun)
        feed(sim, t_wire, t_nic, chunk.flow, chunk.size, overrun)
        offered += np.bincount(chunk.flow, minlength=offered.size)
    end = int(round((sc.duration + sc.drain) * 1e9))
    feed_end(sim, end)
    res = assemble(m, in_flight(m))
    check_conservation(m, res)
    data = res.data
    data["tune"] = _flow_view(m, offered)
    return {"key": task["key"], "data": data}


def _seeded_spec(cap):
    """One group with the capture's flows at their captured rates (Poisson arrivals)."""
    from rxlab.traffic.spec import TrafficSpec

    fl = cap.flows
    rate = float(cap.packets) / max(cap.duration_s, 1e-9)
    size = max(64, min(9018, int(round(cap.bytes / max(cap.packets, 1)))))
    return TrafficSpec(groups=[{
        "name": "pcap", "flows": len(fl), "src": {"addr": "192.0.2.2"},
        "dst": {"addr": "192.0.2.1"},
        "dport": {"value": 1}, "arrivals": {"process": "poisson"}, "size": size,
        "rate": {"pps": rate, "per_flow": "explicit",
                 "weights": [float(x) for x in fl.weight]}}])


def _flow_view(m, offered: np.ndarray) -> dict:
    """Elephant flows and the victims' offered/delivered packets of one run."""
    from rxlab.build import flow_steering

    fl = m.flows
    steer = flow_steering(m.scenario, fl)
    rxq = np.asarray(steer["rxq"], np.int64)
    q_off = np.bincount(rxq, weights=offered, minlength=m.scenario.nic.queues)
    share = offered / np.where(q_off[rxq] > 0, q_off[rxq], 1)
    top = int(np.argmax(offered)) if offered.size else -1
    ele = sorted(set(np.nonzero(share >= ELEPHANT_SHARE)[0].tolist()) | ({top} if top >= 0
                                                                         else set()),
                 key=lambda i: -offered[i])[:8]
    delivered = np.asarray(m.so.flow["flow_delivered"], np.int64)
    fsock = np.asarray(m.params.flow["flow_sock"], np.int64)
    irq = np.asarray(m.params.queue["irq_cpu"], np.int64)
    total = int(offered.sum()) or 1
    rows = []
    for i in ele:
        sk = int(fsock[i])
        rows.append({
            "flow": int(i), "five_tuple": fl.describe(i), "group": fl.group_names[fl.group[i]],
            "offered": int(offered[i]), "delivered": int(delivered[i]),
            "share_of_traffic": round(float(offered[i]) / total, 4),
            "queue": int(rxq[i]), "share_of_queue": round(float(share[i]), 4),
            "irq_cpu": int(irq[rxq[i]]),
            "thread_cpu": int(m.threads[sk][1]) if 0 <= sk < len(m.threads) else None})
    mask = np.ones(offered.size, bool)
    mask[ele] = False
    return {"elephants": rows, "victim_offered": int(offered[mask].sum()),
            "victim_delivered": int(delivered[mask].sum())}


class Runner:
    """Runs settings (override dicts) on every seed, and on the capture when given."""

    def __init__(self, sc, *, seeds: list[int], capture: str | None, jobs: int,
                 say: Callable[[str], None]):
        self.base = sc.model_dump(mode="python", exclude_none=True)
        self.seeds, self.capture, self.jobs, self.say = seeds, capture, jobs, say
        self.labels = [f"seed {s}" for s in seeds] + ([CAPTURE] if capture else [])
        self.done: dict[str, list[dict]] = {}

    def _tasks(self, name: str, overrides: dict) -> list[dict]:
        from rxlab.scenario import scenario_from_dict, with_overrides

        sc = scenario_from_dict(self.base, self.base.get("name", "scenario"))
        if overrides:
            sc = with_overrides(sc, overrides)
        data = sc.model_dump(mode="python", exclude_none=True)
        out = []
        for label in self.labels:
            seed = self.seeds[0] if label == CAPTURE else int(label.split()[1])
            out.append({"key": (name, label), "scenario": {**data, "seed": seed},
                        "mode": CAPTURE if label == CAPTURE else "seeded"})
        return out

    def runs(self, settings: dict[str, dict]) -> dict[str, list[dict]]:
        """{name: overrides} -> {name: [data per label, in ``labels`` order]}."""
        todo = {n: ov for n, ov in settings.items() if n not in self.done}
        tasks = [t for n, ov in todo.items() for t in self._tasks(n, ov)]
        if tasks:
            self.say(f"simulating {', '.join(todo)} on {len(self.labels)} runs each "
                     f"({len(tasks)} simulations, {min(self.jobs, len(tasks))} processes)")
        got: dict = {}
        if self.jobs <= 1 or len(tasks) <= 1:
            for t in tasks:
                r = run_one(t)
                got[tuple(r["key"])] = r["data"]
        else:
            got = _parallel(tasks, self.jobs)
        for n in todo:
            self.done[n] = [got[(n, lab)] for lab in self.labels]
        return {n: self.done[n] for n in settings}


def _parallel(tasks: list[dict], jobs: int) -> dict:
    """The runs on the pool every command uses (``rxlab.parallel``)."""
    from rxlab.parallel import run_each

    out: dict = {}
    run_each(run_one, [(str(i), t) for i, t in enumerate(tasks)], jobs,
             lambda _, r: out.__setitem__(tuple(r["key"]), r["data"]))
    return out


def default_jobs(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1))
