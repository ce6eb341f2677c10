"""CPU time per task, as ``/proc/PID/stat`` shows it (the result's ``tasks``).

Every ns of ``system`` and ``user`` time the model charges belongs to one task: an
application thread (its recvmsg, release_sock's backlog and its own work), a NAPI kthread
of threaded NAPI (``napi/DEV-ID``; rxlab names it by queue), a cpumap entry's kthread
(``cpumap/CPU/map:ID``), the kworker that runs the driver's aRFS work on a CPU. Softirq
time belongs to ``ksoftirqd/N`` when that thread runs it, to the task whose
``local_bh_enable`` ran it inline (a reader's recv(), a NAPI kthread's pass), or to no
task when it ran at irq exit. ``cpu_s`` is what the task's utime + stime would show with
tick-based accounting (``CONFIG_IRQ_TIME_ACCOUNTING`` off, as on this project's
machines: softirq run in a task's context is charged to it); ``softirq_s`` is the part
of it that was softirq, which a kernel with IRQ time accounting leaves out.
"""

from __future__ import annotations

import numpy as np

from rxlab.kernel.counters import T_KSOFTIRQD


def _row(task: str, kind: str, cpu: int, own_ns: int, bh_ns: int, run_s: float) -> dict:
    total = (own_ns + bh_ns) / 1e9
    return {"task": task, "kind": kind, "cpu": int(cpu), "cpu_s": round(total, 9),
            "softirq_s": round(bh_ns / 1e9, 9), "share": round(total / run_s, 6)}


def tasks_block(m) -> list[dict]:
    """Every task that ran, with its CPU time over the whole run (traffic and drain)."""
    sc, p, st, sd, so, nic, cm = m.scenario, m.params, m.st, m.sd, m.so, m.nic, m.cm
    run_s = sc.duration + sc.drain
    rows = []
    for t, (name, _cpu) in enumerate(m.threads):
        r = so.thread[t]
        rows.append(_row(f"{name}/{t}", "app", r["thread_cpu"], int(r["th_ns"]),
                         int(r["th_bh_ns"]), run_s))
    for c in range(p.ncpu):
        ks = int(st.cpu_ns[c, T_KSOFTIRQD])
        if ks:
            rows.append(_row(f"ksoftirqd/{c}", "ksoftirqd", c, 0, ks, run_s))
    for q in np.flatnonzero(p.queue["napi_cpu"] >= 0):
        r = nic.thread[q]
        rows.append(_row(f"napi/q{q}", "napi", p.queue[q]["napi_cpu"], int(r["nt_ns"]),
                         int(r["nt_bh_ns"]), run_s))
    if p.backlog_threaded:
        for c in range(p.ncpu):
            r = nic.thread[p.nq + c]
            rows.append(_row(f"backlog_napi/{c}", "napi", c, int(r["nt_ns"]),
                             int(r["nt_bh_ns"]), run_s))
    # the cpumap's kthreads, when the scenario has one (without it the state keeps one
    # placeholder entry, no task)
    for e, cpu in enumerate(p.cpumap["cpu"] if sc.cpumap is not None else []):
        rows.append(_row(f"cpumap/{cpu}", "cpumap", cpu, int(cm.entry[e]["kt_ns"]), 0, run_s))
    for c in np.flatnonzero(sd.cpu["kw_ns"]):
        rows.append(_row(f"kworker/{c} (aRFS)", "kworker", c, int(sd.cpu[c]["kw_ns"]), 0,
                         run_s))
    return rows
