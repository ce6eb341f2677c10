"""``simulate(scenario) -> Result``: stream traffic chunks through the jitted loop.

Memory is bounded by flows and queues, not by run length: traffic is generated in
chunks, shaped by the wire and the NIC, and merged with the event calendar chunk by
chunk, and the time series have at most ``rxlab.memory_budget.max_intervals``
intervals. Chunk size is not a model parameter (results are identical for any size).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rxlab._cache import announce_compile
from rxlab.build import Model, build
from rxlab.errors import ConservationError
from rxlab.kernel.counters import T_SOFTIRQ, T_SYSTEM, T_USER
from rxlab.kernel.rx_loop import feed, feed_end, shape
from rxlab.kernel.sim import sim_of
from rxlab.metrics.result import Result, assemble
from rxlab.scenario import Scenario, load_scenario, with_overrides
from rxlab.traffic.stream import PacketStream

DEFAULT_CHUNK = 1 << 18


def in_flight(m: Model) -> int:
    """Packets still queued anywhere (rings, backlogs, sockets, cpumap bulk queues and
    ptr_rings), counted from the queues."""
    ring = int((m.nic.queue["ring_tail"] - m.nic.queue["ring_head"]).sum())
    backlog = int((m.sd.cpu["bl_tail"] - m.sd.cpu["bl_head"]).sum())
    sockets = int((m.so.sock["so_tail"] - m.so.sock["so_head"]).sum())
    cpumap = int(m.cm.bq_n.sum() + (m.cm.entry["prod"] - m.cm.entry["cons"]).sum())
    return ring + backlog + sockets + cpumap


SHARES = ("softirq", "irq", "system", "user", "idle")  # a CPU's whole time, once each
SHARE_TOLERANCE = 1e-5  # five shares rounded to 6 decimals


def check_cpu_time(res: Result) -> None:
    """Per CPU, the shares of its time sum to 1 and each is in [0, 1] (ksoftirqd's is
    part of softirq's): a CPU runs one thing at a time, so anything else is a model bug."""
    for row in res.data["cpus"]:
        u = row["util"]
        total = sum(u[k] for k in SHARES)
        bad = [k for k in u if not -SHARE_TOLERANCE <= u[k] <= 1 + SHARE_TOLERANCE]
        if bad or abs(total - 1) > SHARE_TOLERANCE or u["ksoftirqd"] > u["softirq"]:
            figures = ", ".join(f"{k} {u[k]:g}" for k in u)
            raise ConservationError(
                f"CPU time conservation broken on CPU {row['cpu']}: {figures} "
                f"(sum {total:.6f}, must be 1 with each share in [0, 1])")


def check_task_time(m: Model) -> None:
    """Every ns of system and user time belongs to a task, and the softirq the tasks
    ran in their own context is part of the CPUs' inline softirq (rxlab.metrics.tasks):
    a mechanism that charges a CPU without its task is a model bug."""
    so, nic, cm, sd, cpu_ns = m.so.thread, m.nic.thread, m.cm.entry, m.sd.cpu, m.st.cpu_ns
    own = int(so["th_ns"].sum() + nic["nt_ns"].sum() + cm["kt_ns"].sum() + sd["kw_ns"].sum())
    charged = int(cpu_ns[:, T_SYSTEM].sum() + cpu_ns[:, T_USER].sum())
    inline = int(so["th_bh_ns"].sum() + nic["nt_bh_ns"].sum())
    if own != charged or inline > int(cpu_ns[:, T_SOFTIRQ].sum()):
        raise ConservationError(
            f"task time conservation broken: the tasks' own time {own} ns != system + user "
            f"{charged} ns, or their inline softirq {inline} ns > the CPUs' "
            f"{int(cpu_ns[:, T_SOFTIRQ].sum())} ns")


def check_conservation(m: Model, res: Result) -> None:
    """Every packet accounted for, every CPU's time (check_cpu_time) and every task's
    (check_task_time)."""
    check_cpu_time(res)
    check_task_time(m)
    pk = res.data["packets"]
    if pk["offered"] != pk["delivered"] + pk["dropped"] + pk["forwarded"] + pk["in_flight"]:
        raise ConservationError(
            f"packet conservation broken: offered {pk['offered']} != delivered "
            f"{pk['delivered']} + dropped {pk['dropped']} + forwarded {pk['forwarded']} + "
            f"in flight {pk['in_flight']}"
        )


def run_model(
    m: Model,
    chunk_packets: int = DEFAULT_CHUNK,
    progress: Callable[[int, float], None] | None = None,
) -> None:
    """Run a built model to the end of its drain window (mutates the model's state)."""
    sc = m.scenario
    if m.capture is not None:
        from rxlab.capture.pcap import PcapStream

        stream = PcapStream(m.capture, sc.duration)
    else:
        stream = PacketStream(sc.traffic, m.flows, sc.seed, sc.duration)
    link_ps_per_byte = int(round(8000.0 / sc.nic.link_gbps))  # ps per byte on the wire
    svc_ns = int(round(1e9 / sc.nic.max_pps)) if sc.nic.max_pps else 0
    announce_compile()
    sim = sim_of(m)
    done = 0
    for chunk in stream.chunks(chunk_packets):
        n = len(chunk)
        t_wire = np.empty(n, np.int64)
        t_nic = np.empty(n, np.int64)
        overrun = np.empty(n, np.bool_)
        shape(chunk.t_ns, chunk.size, link_ps_per_byte, svc_ns, sc.nic.nic_fifo,
              m.port_state, t_wire, t_nic, overrun)
        feed(sim, t_wire, t_nic, chunk.flow, chunk.size, overrun)
        done += n
        if progress:
            progress(done, float(t_nic[-1]) / 1e9 if n else 0.0)
    end = int(round((sc.duration + sc.drain) * 1e9))
    feed_end(sim, end)


def simulate(
    scenario: Scenario | str,
    *,
    seed: int | None = None,
    duration: float | None = None,
    overrides: dict | None = None,
    chunk_packets: int = DEFAULT_CHUNK,
    progress: Callable[[int, float], None] | None = None,
    xdp_program: Callable | None = None,
    max_memory: int | str | None = None,
) -> Result:
    """Simulate a scenario (object, YAML path or built-in name) and return its Result.

    ``xdp_program(fields) -> (verdicts, keys)`` replaces the scenario's XDP rules with a
    vectorised function over the flows (see ``rxlab.xdp.rules.apply_user_program``).

    ``max_memory`` (bytes, or a size such as ``'8GiB'``) bounds the memory the scenario
    may need; default: ``--max-memory`` / ``RXLAB_MAX_MEMORY``, else half the machine's
    memory (``rxlab.memory_budget``). The check runs before anything is allocated.

    Raises ``UsageError`` for bad input and ``ConservationError`` if any packet is
    unaccounted for.
    """
    sc = load_scenario(scenario) if isinstance(scenario, str) else scenario
    ov = dict(overrides or {})
    if seed is not None:
        ov["seed"] = seed
    if duration is not None:
        ov["duration"] = duration
    if ov:
        sc = with_overrides(sc, ov)
    m = build(sc, xdp_program=xdp_program, max_memory=max_memory)
    run_model(m, chunk_packets, progress)
    res = assemble(m, in_flight(m))
    if m.capture is not None:
        res.data["capture"] = m.capture.summary()
    check_conservation(m, res)
    return res
