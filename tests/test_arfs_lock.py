"""The driver's aRFS lock as waiting: ``arfs_lock`` and the ice service task's walk.

Checked against things rxlab did not write: a lock taken in arrival order with a fixed
hold is an M/D/1 FIFO server, whose mean wait is the Pollaczek-Khinchine formula
Wq = rho * D / (2 * (1 - rho)); ``ice_sync_arfs_fltrs`` (drivers/net/ethernet/intel/ice/
ice_arfs.c) holds the lock over every bucket and entry, so the hold is that count times
the profile's per-bucket and per-entry costs; a caller that finds the lock held spins
until it is released; holds never overlap; every packet still ends delivered or dropped
and a rerun is bit-identical.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.compiled_calls import arfs_lock, arfs_lock_each, ice_sync, ndo_rx_flow_steer
from support.rfs_harness import Harness, rfs_dict, tcp_group

from rxlab.kernel.counters import (
    CNT_DELIVERED,
    CNT_DROP0,
    CNT_OFFERED,
    T_KSOFTIRQD,
    T_SOFTIRQ,
    T_SYSTEM,
)
from rxlab.kernel.drop_reasons import N_DROP_SLOTS
from rxlab.kernel.stages import C_ARFS_PROGRAM, C_ARFS_STEER, C_ARFS_SYNC_BUCKET, C_ARFS_SYNC_ENTRY
from rxlab.kernel.state import ARFS_ACTIVE

ICE_MAX_ARFS_LIST = 1024


def ice_host():
    h = Harness(rfs_dict(cpus=4, version="6.14", arfs="ice-hash-match",
                         groups=[tcp_group(flows=64)]))
    h.reset()
    return h


def test_lock_in_arrival_order_is_an_md1_queue():
    """Poisson calls from 64 CPUs (merged: Poisson), a fixed hold: mean wait = P-K."""
    h = ice_host()
    rng = np.random.default_rng(12345)
    hold, rho, n_cpu, n = 1_000, 0.6, 64, 200_000
    lam = rho / hold  # calls per ns, all CPUs together
    t = np.concatenate([np.cumsum(rng.exponential(n_cpu / lam, n // n_cpu))
                        for _ in range(n_cpu)])
    t = np.sort(t).astype(np.int64) + 1
    wait = np.zeros(t.size, np.int64)
    arfs_lock_each(h.s, t, np.full(t.size, hold, np.int64), wait)
    wq = rho * hold / (2 * (1 - rho))  # Pollaczek-Khinchine, M/D/1
    assert abs(wait.mean() - wq) / wq < 0.03
    # P(wait) = rho for an M/G/1 FIFO server (PASTA)
    assert abs((wait > 0).mean() - rho) < 0.01


def test_holds_never_overlap_when_calls_come_segment_by_segment():
    """Softirq segments are computed whole at their start, so calls reach the lock out
    of time order across CPUs: each still takes it at or after its own time, and no two
    holds overlap."""
    h = ice_host()
    rng = np.random.default_rng(7)
    calls = []  # (segment start, call time, hold)
    for _cpu in range(16):
        t0 = 0
        for _ in range(200):
            t0 += int(rng.exponential(20_000))
            k = int(rng.integers(1, 8))
            times = t0 + np.cumsum(rng.integers(200, 3_000, k))
            calls += [(t0, int(x), int(rng.integers(50, 400))) for x in times]
    calls.sort(key=lambda x: x[0])  # the order the model computes them in
    t = np.array([c[1] for c in calls], np.int64)
    hold = np.array([c[2] for c in calls], np.int64)
    wait = np.zeros(t.size, np.int64)
    arfs_lock_each(h.s, t, hold, wait)
    assert (wait >= 0).all() and (wait > 0).any()
    start = t + wait
    order = np.argsort(start, kind="stable")
    assert (start[order][1:] >= (start + hold)[order][:-1]).all()


def test_sync_walk_holds_the_lock_for_buckets_and_entries():
    h = ice_host()
    n = 40
    for f in range(n):
        assert ndo_rx_flow_steer(h.s, f, 0x5000 + 37 * f, 1, f, 0, 0) >= 0
    cb = int(h.p.cost_i[C_ARFS_SYNC_BUCKET])
    ce = int(h.p.cost_i[C_ARFS_SYNC_ENTRY])
    assert cb > 0 and ce > 0  # the profile's costs
    hold = ICE_MAX_ARFS_LIST * cb + n * ce
    t0 = 1_000_000
    assert ice_sync(h.s, t0) == t0 + hold
    c = h.ar.cnt[0]
    assert (c["arfs_sync_runs"], c["arfs_sync_hold_ns"], c["arfs_sync_wait_ns"]) == (1, hold, 0)
    # ice_arfs_update_flow_rules: every INACTIVE entry is marked ACTIVE, on the add list
    used = h.ar.entry[h.ar.entry["state"] != -1]
    assert len(used) == n and (used["state"] == ARFS_ACTIVE).all()
    assert int(h.ar.glob[0]["pend_n"]) == n

    # a steer call arriving during the walk spins exactly until it ends
    assert arfs_lock(h.s, t0 + 123, 150) == hold - 123
    # a second run queued behind that call: waits for it, walks the same n entries, and
    # (no rflow holds these filters: rps_may_expire_flow says yes) deletes every one
    t1 = t0 + hold // 2
    assert ice_sync(h.s, t1) == t0 + hold + 150 + hold
    assert c["arfs_sync_wait_ns"] == t0 + hold + 150 - t1
    assert c["arfs_expire"] == n and int(h.ar.glob[0]["free_n"]) == h.ar.entry.size
    assert int(h.ar.glob[0]["svc_debt"]) == n * int(h.p.cost_i[C_ARFS_PROGRAM])


# ----------------------------------------------------------------- end to end -------
def contended():
    """The original ice driver on 8 CPUs with flows fighting over 64-slot tables (as in
    test_arfs_kworker) and a slow walk: the service task holds the lock much of the
    time, and mis-steering softirqs find it held."""
    d = rfs_dict(cpus=8, version="6.14", flow_cnt=64, entries=8 * 64,
                 groups=[tcp_group(flows=2048, pps=1_000_000)],
                 arfs={"model": "ice-hash-match"},
                 apps=[{"name": "app", "cpus": "0-3", "spread": "round_robin",
                        "cost": {"user_ns": 200, "syscall_ns": 0}}])
    d["host"]["costs"] = {"arfs_sync_entry": 500.0}
    return d


@pytest.fixture(scope="module")
def runs():
    from rxlab.build import build
    from rxlab.scenario import scenario_from_dict
    from rxlab.simulate import run_model

    out = []
    for _ in range(2):
        m = build(scenario_from_dict(contended()))
        run_model(m)
        out.append(m)
    return out


def test_contention_is_waited_for_and_charged(runs):
    m = runs[0]
    c = m.ar.cnt[0]
    assert c["arfs_sync_runs"] > 1 and c["arfs_lock_contended"] > 0 and c["arfs_lock_wait_ns"] > 0
    # holds never overlap: all of them fit in the run
    d = contended()
    span = (d["duration"] + d["drain"]) * 1e9
    steer = int(m.params.cost_i[C_ARFS_STEER])
    assert c["arfs_sync_hold_ns"] + m.rf.cnt[0]["arfs_calls"] * steer <= span
    # the softirqs' spin is softirq time; the service task's spin and walk system time
    cpu = m.st.cpu_ns
    assert cpu[:, T_SOFTIRQ].sum() + cpu[:, T_KSOFTIRQD].sum() >= c["arfs_lock_wait_ns"]
    assert cpu[:, T_SYSTEM].sum() >= c["arfs_sync_hold_ns"] + c["arfs_sync_wait_ns"]


def test_conservation_and_determinism(runs):
    a, b = runs
    cnt = a.st.cnt
    dropped = int(cnt[CNT_DROP0:CNT_DROP0 + N_DROP_SLOTS].sum())
    assert cnt[CNT_OFFERED] > 0
    assert cnt[CNT_OFFERED] == cnt[CNT_DELIVERED] + dropped  # drained: nothing in flight
    for x, y in ((a.st.cnt, b.st.cnt), (a.st.cpu_ns, b.st.cpu_ns), (a.ar.cnt, b.ar.cnt)):
        assert np.array_equal(x, y)


# ------------------------------------------------------------------------- mlx5 -------
# en_arfs.c: every work item (arfs_handle_work) writes its rule, then calls
# arfs_may_expire_flow, which under arfs->arfs_lock walks the 4 x 256 buckets in order and
# stops after the 62nd rule it lets go; mlx5 has no timer for it.
MLX5_BUCKETS = 4 * 256
MLX5_EXPIRED_PER_SCAN = 62  # if (quota++ > MLX5E_ARFS_EXPIRY_QUOTA (60)) break


def mlx5_host(flows=64):
    h = Harness(rfs_dict(cpus=4, arfs="mlx5", groups=[tcp_group(flows=flows)]))
    h.reset()
    return h


def test_mlx5_scan_holds_the_lock_for_what_it_visits():
    from support.compiled_calls import arfs_program_pending, mlx5_expire

    h = mlx5_host()
    cb = int(h.p.cost_i[C_ARFS_SYNC_BUCKET])
    ce = int(h.p.cost_i[C_ARFS_SYNC_ENTRY])
    cw = int(h.p.cost_i[C_ARFS_PROGRAM])
    n = 64
    for f in range(n):  # one rule per flow; no rps_dev_flow slot holds its filter id
        assert ndo_rx_flow_steer(h.s, f, 0x100 + f, 2, f, 0, 0) >= 0
    assert int(h.ar.entry.size - h.ar.glob[0]["free_n"]) == n
    arfs_program_pending(h.s, 1_000)
    h.ar.glob[0]["svc_debt"] = 0
    # every rule may go: the walk stops after the 62nd, somewhere inside the tables
    t0 = 1_000_000
    t1 = int(mlx5_expire(h.s, t0))
    c = h.ar.cnt[0]
    assert c["arfs_expire"] == MLX5_EXPIRED_PER_SCAN
    hold = t1 - t0
    assert c["arfs_sync_hold_ns"] == hold and c["arfs_sync_wait_ns"] == 0
    # its hold: the buckets up to the one it stopped in, and the rules it visited (all
    # of them deleted, so 62), never more than a full walk
    visited_buckets = (hold - MLX5_EXPIRED_PER_SCAN * ce) // cb
    assert (hold - MLX5_EXPIRED_PER_SCAN * ce) % cb == 0
    assert 1 <= visited_buckets <= MLX5_BUCKETS
    assert int(h.ar.glob[0]["svc_debt"]) == MLX5_EXPIRED_PER_SCAN * cw  # the deletions
    # a steer call meanwhile spins until the scan releases the lock
    assert arfs_lock(h.s, t0 + 7, 150) == hold - 7
    # the next scan takes the rest and walks every bucket
    t2 = t1 + 10_000
    rest = n - MLX5_EXPIRED_PER_SCAN
    assert int(mlx5_expire(h.s, t2)) == t2 + MLX5_BUCKETS * cb + rest * ce
    assert c["arfs_expire"] == n and c["arfs_sync_runs"] == 2


def test_mlx5_scan_skips_rules_whose_work_is_pending():
    from support.compiled_calls import mlx5_expire

    h = mlx5_host()
    for f in range(10):
        assert ndo_rx_flow_steer(h.s, f, 0x200 + f, 2, f, 0, 0) >= 0
    # all ten work items are queued (not run): !work_pending(&rule->arfs_work) fails
    t = int(mlx5_expire(h.s, 1_000_000))
    assert h.ar.cnt[0]["arfs_expire"] == 0
    cb, ce = int(h.p.cost_i[C_ARFS_SYNC_BUCKET]), int(h.p.cost_i[C_ARFS_SYNC_ENTRY])
    assert t == 1_000_000 + MLX5_BUCKETS * cb + 10 * ce


def mlx5_run(drain):
    from rxlab.build import build
    from rxlab.scenario import scenario_from_dict
    from rxlab.simulate import run_model

    d = rfs_dict(cpus=8, flow_cnt=64, entries=8 * 64, groups=[tcp_group(flows=512,
                                                                          pps=200_000)],
                 arfs={"model": "mlx5"},
                 apps=[{"name": "app", "cpus": "0-3", "spread": "round_robin",
                        "cost": {"user_ns": 200, "syscall_ns": 0}}])
    d["drain"] = drain
    m = build(scenario_from_dict(d))
    run_model(m)
    return m


def test_mlx5_every_work_item_scans_and_no_timer_does():
    """One scan per work item run: as many scans as rules written, whatever the drain
    adds (no packets, no work items, so no scans: idle rules stay, as with mlx5)."""

    short, long_ = mlx5_run(0.005), mlx5_run(0.5)
    for m in (short, long_):
        c = m.ar.cnt[0]
        assert c["arfs_sync_runs"] > 0
        assert c["arfs_sync_runs"] >= c["arfs_programmed"]
    # the 0.495 s of extra drain (past every packet) brings no scan and expires nothing
    assert long_.ar.cnt[0]["arfs_sync_runs"] == short.ar.cnt[0]["arfs_sync_runs"]
    assert long_.ar.cnt[0]["arfs_expire"] == short.ar.cnt[0]["arfs_expire"]


def test_mlx5_churn_conserves_and_repeats():
    """Flows sharing rps_dev_flow slots (kernel 6.15, 64-slot tables) keep expiring each
    other's rules: every work item scans, scans delete, steer calls wait for them; every
    packet still ends delivered or dropped, and a rerun is bit-identical."""
    from rxlab.build import build
    from rxlab.scenario import scenario_from_dict
    from rxlab.simulate import run_model

    d = rfs_dict(cpus=8, version="6.15", flow_cnt=64, entries=8 * 64, duration=0.05,
                 arfs={"model": "mlx5"}, groups=[tcp_group(flows=512, pps=200_000)],
                 apps=[{"name": "app", "cpus": "0-3", "spread": "round_robin",
                        "cost": {"user_ns": 200}}])
    runs = []
    for _ in range(2):
        m = build(scenario_from_dict(d))
        run_model(m)
        runs.append(m)
    a, b = runs
    c = a.ar.cnt[0]
    assert c["arfs_expire"] > 100 and c["arfs_sync_runs"] > 100 and c["arfs_lock_contended"] > 0
    cnt = a.st.cnt
    dropped = int(cnt[CNT_DROP0:CNT_DROP0 + N_DROP_SLOTS].sum())
    assert cnt[CNT_OFFERED] == cnt[CNT_DELIVERED] + dropped
    for x, y in ((a.st.cnt, b.st.cnt), (a.st.cpu_ns, b.st.cpu_ns), (a.ar.cnt, b.ar.cnt)):
        assert np.array_equal(x, y)
