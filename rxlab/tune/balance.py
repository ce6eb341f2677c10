"""Indirection-table balancing: the load model, RSS++'s greedy migration, and ours.

**Load model.** Bucket ``b`` of the RSS indirection table carries ``pps[b]`` packets/s
(sum of its flows' rates, bucket = RSS hash & (size - 1), the NIC's lookup). The table
sends bucket ``b`` to queue ``table[b]``, whose interrupt runs on CPU ``irq[q]``. A CPU's
load (busy fraction) is modelled as

    load[c] = base[c] + [c takes an rx IRQ] * irq_ns * 1e-9 + cost_ns * 1e-9 * pps[c]

``base`` is work the table does not move (application threads: user + system time),
``cost_ns`` the table-dependent CPU time per packet and ``irq_ns`` a per-CPU overhead,
both fitted to a simulated run (``LoadModel.fit``).

**RSS++** (Barbette et al., CoNEXT 2019; its code, ``rsspp.cc``): ``rsspp_round``
and ``rsspp_solve`` follow ``vendor/nicscheduler/methods/rsspp.cc`` and ``solver.hh``
step by step (``MethodRSSPP::rebalance`` steps 1-7, its default parameters, no
autoscale/dancer/NUMA). Its "cores" are
the rx queues (kernel mode: one queue per core); a queue's load is its CPU's load shared
by the queues on that CPU in proportion to packets. Deviations, all deterministic:
priority-queue ties break on the lower index (``std::priority_queue`` leaves them to the
heap); arithmetic is double, not float. The tolerance search of step 6 is reproduced with
its published trajectory, and the published choice (the last run) is the baseline; the
genuinely best-scoring run of the same trajectory is kept alongside
(``RssppResult.best_table``), as a re-implementation may.

**Ours** (``optimise``): minimise the largest CPU load, then the sum of squared loads,
then the buckets moved. Starts: longest-processing-time-first from scratch, the current
table, RSS++'s tables and the weight form; each improved by a move/swap local search
that only accepts changes lowering the pair's larger load (so the maximum never rises
and the sum of squares strictly falls), then whole bucket sets are exchanged between
CPUs and single buckets sent home where that costs no balance (fewer moves). Starting
one local search from RSS++'s table makes ours never worse than RSS++ on the model.
``lower_bound`` gives a bound no table can beat (heaviest bucket on the least loaded
CPU; water-filling of the total), so the report shows the remaining gap.

**Weight form** (``contiguous``): ``ethtool -X DEV weight W0 W1 ...`` can only write
contiguous runs (ethtool ``fill_indir_table``), so the best such table is a linear
partition of the bucket sequence: the smallest feasible maximum by bisection with a
greedy test, then a DP for the least sum of squares under that maximum.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from rxlab.nic import indirection

# RSS++ defaults (rsspp.cc, solver.hh)
THETA = 0.02  # IMBALANCE_THRESHOLD
ALPHA = 1.0  # IMBALANCE_ALPHA
TARGET_IMBALANCE = 0.01  # solver stop target (sum of squared residuals)
INIT_ALLOWED = -0.01  # initial overload/underload tolerances
MAX_RUNS = 10  # solver runs per round
MIN_ROOM = 0.01  # an underloaded core keeps receiving while its room is above this


# --------------------------------------------------------------------------- model


@dataclass
class LoadModel:
    bucket_pps: np.ndarray  # float64[B]
    irq_cpu: np.ndarray  # int64[nq]: CPU of each queue's interrupt
    base: np.ndarray  # float64[ncpu]: load the table does not move
    cost_ns: float  # table-dependent CPU time per packet
    irq_ns: float = 0.0  # per-IRQ-CPU overhead, busy fraction x 1e9
    source: str = ""

    @property
    def ncpu(self) -> int:
        return self.base.size

    @property
    def nq(self) -> int:
        return self.irq_cpu.size

    @property
    def size(self) -> int:
        return self.bucket_pps.size

    @property
    def bucket_load(self) -> np.ndarray:
        return self.bucket_pps * (self.cost_ns * 1e-9)

    @property
    def irq_cpus(self) -> np.ndarray:
        """CPUs that take an rx interrupt: the ones a table can put load on."""
        return np.unique(self.irq_cpu)

    def fixed(self) -> np.ndarray:
        """Per-CPU load that does not depend on the table."""
        f = self.base.copy()
        f[self.irq_cpus] += self.irq_ns * 1e-9
        return f

    def cpu_loads(self, table) -> np.ndarray:
        t = np.asarray(table, np.int64)
        return self.fixed() + np.bincount(self.irq_cpu[t], weights=self.bucket_load,
                                          minlength=self.ncpu)

    def queue_pps(self, table) -> np.ndarray:
        return np.bincount(np.asarray(table, np.int64), weights=self.bucket_pps,
                           minlength=self.nq)

    def summary(self, table) -> dict:
        """max, mean and max/mean over the IRQ CPUs (the CPUs a table balances)."""
        return load_summary(self.cpu_loads(table)[self.irq_cpus])

    @classmethod
    def fit(cls, bucket_pps, irq_cpu, busy, rx_busy, cpu_pps, *, rps: bool,
            rps_share: float = 1.0) -> LoadModel:
        """Fit ``cost_ns`` and ``irq_ns`` to a simulated run.

        ``busy``: simulated busy fraction per CPU; ``rx_busy``: its softirq + hardirq
        part; ``cpu_pps``: packets/s each CPU's rx queues took. Without RPS all rx work
        of a queue runs on its IRQ CPU: least squares ``rx_busy = irq + cost * pps`` over
        the IRQ CPUs (plain ratio when that is ill-posed). With RPS only the first stage
        stays on the IRQ CPU (``rps_share`` of the per-packet cost, from the cost profile);
        the rest is spread by RPS and counted in ``base``.
        """
        irq_cpu = np.asarray(irq_cpu, np.int64)
        cpus = np.unique(irq_cpu)
        busy = np.asarray(busy, float)
        rx = np.asarray(rx_busy, float)
        pps = np.asarray(cpu_pps, float)
        x, y = pps[cpus], rx[cpus]
        total = float(x.sum())
        cost = float(y.sum() / total * 1e9) if total > 0 else 0.0
        irq_ns = 0.0
        src = "ratio of simulated softirq+hardirq time to packets"
        if cpus.size >= 3 and np.ptp(x) > 0:
            k, a = np.polyfit(x, y, 1)
            if k > 0 and a >= 0:
                cost, irq_ns = float(k * 1e9), float(a * 1e9)
                src = "least squares over IRQ CPUs of simulated softirq+hardirq vs packets/s"
        if rps:  # first stage only; the full cost is total rx time over all packets
            cost = float(rx.sum() / total * 1e9) * rps_share if total > 0 else 0.0
            irq_ns = 0.0
            src = (f"simulated softirq+hardirq time per packet x {rps_share:.2f}, the share of "
                   "the per-packet cost profile that stays on the IRQ CPU with RPS on")
        model = cls(np.asarray(bucket_pps, float), irq_cpu, np.zeros(busy.size), cost,
                    irq_ns, src)
        if rps:  # base: the residual (RPS targets' work, applications)
            model.base = np.maximum(0.0, busy - model.fixed() - pps * cost * 1e-9)
        else:  # base: application time (user + system)
            model.base = np.maximum(0.0, busy - rx)
        return model


def load_summary(loads) -> dict:
    x = np.asarray(loads, float)
    mean = float(x.mean()) if x.size else 0.0
    mx = float(x.max()) if x.size else 0.0
    return {"max": mx, "mean": mean, "imbalance": mx / mean if mean > 0 else 1.0}


def buckets_moved(a, b) -> int:
    return int(np.count_nonzero(np.asarray(a) != np.asarray(b)))


# --------------------------------------------------------------------------- RSS++


@dataclass
class SolveResult:
    transfer: np.ndarray  # per problem bucket: underloaded index or -1 (last run)
    runs: list = field(default_factory=list)  # per run: (oa, ua, sq, transfer)

    @property
    def best(self) -> np.ndarray:
        return min(self.runs, key=lambda r: r[2])[3]


def rsspp_solve(bucket_load, bucket_owner, over, under) -> SolveResult:
    """``BucketMapTargetProblem::solve`` (solver.hh of RSS++; steps 5-6 of its rebalance).

    bucket_load[i], bucket_owner[i] (index into ``over``); over[o] = excess of overloaded
    core o; under[u] = room of underloaded core u. Returns the published choice (the
    last run's transfer) and every run of the tolerance search.
    """
    bl = [float(x) for x in bucket_load]
    owner = [int(x) for x in bucket_owner]
    oa = ua = INIT_ALLOWED
    bottom_oa, bottom_ua = oa, ua
    top_oa = top_ua = oa_min = ua_min = 0.0
    inf = math.inf
    last_sq = min_sq = bottom_sq = top_sq = inf  # min_sq is never updated (published)
    run, m, phase = 1, -1.0, 0
    res = SolveResult(np.full(len(bl), -1, np.int64))
    while True:
        imb_u = imb_o = sq = 0.0
        transfer = np.full(len(bl), -1, np.int64)
        # max-heaps as (-load, index): ties pop the lower index first
        stacks = [[] for _ in over]
        for i, load in enumerate(bl):
            heapq.heappush(stacks[owner[i]], (-load, i))
        ov = [(-float(x), o) for o, x in enumerate(over)]
        heapq.heapify(ov)
        un = [(-float(x), u) for u, x in enumerate(under)]
        heapq.heapify(un)
        while ov and un:
            o_neg, o = heapq.heappop(ov)
            o_load = -o_neg
            b_neg, b = heapq.heappop(stacks[o])
            b_load = -b_neg
            save = []
            while un:
                u_neg, u = heapq.heappop(un)
                u_load = -u_neg
                if b_load < u_load + ua:
                    u_load -= b_load
                    o_load -= b_load
                    transfer[b] = u
                    if u_load > MIN_ROOM:
                        heapq.heappush(un, (-u_load, u))
                    else:
                        imb_u += abs(u_load)
                        sq += u_load * u_load
                    break
                save.append((u_neg, u))
            for s in reversed(save):
                heapq.heappush(un, s)
            if o_load > -oa and stacks[o]:
                heapq.heappush(ov, (-o_load, o))
            else:
                imb_o += abs(o_load)
                sq += o_load * o_load
        for o_neg, _ in ov:
            imb_o += abs(o_neg)
            sq += o_neg * o_neg
        for u_neg, _ in un:
            imb_u += abs(u_neg)
            sq += u_neg * u_neg
        res.runs.append((oa, ua, sq, transfer))
        res.transfer = transfer
        if run == MAX_RUNS or sq < TARGET_IMBALANCE:
            break
        if run == 1:
            oa, ua = imb_o, imb_u
            phase = 1
        else:
            if sq < min_sq:
                oa_min, ua_min = oa, ua
            if phase == 1:
                if sq <= last_sq:
                    oa, ua = oa + oa / 2, ua + ua / 2
                else:
                    phase = 2
                    top_oa, top_ua = oa, ua
                    m = 0.5
                    oa, ua = oa / 2, ua / 2
            elif phase == 2:
                if sq <= last_sq:
                    m = m / 2
                    if m < 0.01:
                        break
                    oa = bottom_oa + (top_oa - bottom_oa) * m
                    ua = bottom_ua + (top_ua - bottom_ua) * m
                else:
                    bottom_oa, bottom_ua, bottom_sq = oa, ua, sq
                    phase = 3
                    m = 0.5
                    oa, ua = (bottom_oa + top_oa) / 2, (bottom_ua + top_ua) / 2
            elif phase == 3:
                if sq <= last_sq:
                    m = (1 + m) / 2
                    if m > 0.99:
                        break
                    oa = bottom_oa + (top_oa - bottom_oa) * m
                    ua = bottom_ua + (top_ua - bottom_ua) * m
                else:
                    phase = 2
                    top_oa, top_ua, top_sq = oa, ua, sq
                    m = 0.5
                    oa = bottom_oa + (top_oa - bottom_oa) * m
                    ua = bottom_ua + (top_ua - bottom_ua) * m
            if top_sq == bottom_sq == sq == min_sq:
                break
        run += 1
        last_sq = sq
        if run == MAX_RUNS:
            if sq != min_sq:
                oa, ua = oa_min, ua_min
            else:
                break
    return res


def rsspp_round(table, counts, core_load, moved, *, keep_best: bool = False) -> dict:
    """One RSS++ rebalancing round (``MethodRSSPP::rebalance``, steps 1-7).

    table: bucket -> core (queue); counts: packets per bucket this tick; core_load:
    L_c in [0, 1] per core; moved: per-core "received buckets last round" flags, updated
    in place. Returns the new table, the moves and the per-core imbalance after them.
    """
    table = np.asarray(table, np.int64).copy()
    counts = np.asarray(counts, float)
    L = np.asarray(core_load, float)
    n = L.size
    mean = float(L.sum()) / n
    npk = np.bincount(table, weights=counts, minlength=n)
    nz = np.bincount(table, weights=(counts > 0).astype(float), minlength=n)
    imb = np.zeros(n)
    uid, oid = [], []
    for i in range(n):
        if moved[i]:
            imb[i] = 0.0
            moved[i] = False
            continue
        imb[i] = ALPHA * (mean - L[i])
        if imb[i] > THETA:
            uid.append(i)
        elif imb[i] < -THETA and nz[i] > 1:
            oid.append(i)
    moves = []
    runs = 0
    if oid and uid:
        pos = {c: k for k, c in enumerate(oid)}
        bidx = [j for j in range(table.size) if counts[j] > 0 and int(table[j]) in pos]
        if bidx:
            owner = [pos[int(table[j])] for j in bidx]
            bload = [counts[j] / npk[table[j]] * L[table[j]] for j in bidx]
            sol = rsspp_solve(bload, owner, [-imb[c] for c in oid], [imb[c] for c in uid])
            runs = len(sol.runs)
            transfer = sol.best if keep_best else sol.transfer
            for i, to in enumerate(transfer):
                if to < 0:
                    continue
                j, frm, dst = bidx[i], oid[owner[i]], uid[int(to)]
                imb[frm] += bload[i]
                imb[dst] -= bload[i]
                table[j] = dst
                moved[dst] = True
                moves.append((j, frm, dst))
    return {"table": table, "moves": moves, "imbalance": imb, "solver_runs": runs,
            "total_imbalance": float(np.abs(imb).sum())}


@dataclass
class RssppResult:
    table: np.ndarray  # published choice, after the last round
    best_table: np.ndarray  # same rounds, keeping each round's best-scoring solver run
    rounds: list  # per round: {"moves", "max", "imbalance"} of the published variant
    best_rounds: list


def rsspp(model: LoadModel, table, rounds: int = 20) -> RssppResult:
    """RSS++ ticks on a steady workload until a round moves nothing (or ``rounds``).

    Each tick measures the model's per-queue loads (clamped to [0, 1], as a busy
    fraction is) and per-bucket packet counts, then runs ``rsspp_round``.
    """
    out = []
    for keep_best in (False, True):
        t = np.asarray(table, np.int64).copy()
        moved = np.zeros(model.nq, bool)
        hist = []
        for _ in range(rounds):
            r = rsspp_round(t, model.bucket_pps, queue_loads(model, t), moved,
                            keep_best=keep_best)
            t = r["table"]
            s = model.summary(t)
            hist.append({"moves": len(r["moves"]), "max": s["max"],
                         "imbalance": s["imbalance"], "solver_runs": r["solver_runs"]})
            if not r["moves"] and not moved.any():
                break
        out.append((t, hist))
    return RssppResult(out[0][0], out[1][0], out[0][1], out[1][1])


def queue_loads(model: LoadModel, table) -> np.ndarray:
    """Per-queue load for RSS++: its CPU's load split by packets among the CPU's queues
    (equal split when none has packets), clamped to [0, 1]."""
    cpu = model.cpu_loads(table)
    qp = model.queue_pps(table)
    cp = np.bincount(model.irq_cpu, weights=qp, minlength=model.ncpu)
    nq_on = np.bincount(model.irq_cpu, minlength=model.ncpu)
    share = np.where(cp[model.irq_cpu] > 0, qp / np.where(cp > 0, cp, 1)[model.irq_cpu],
                     1.0 / nq_on[model.irq_cpu])
    return np.clip(cpu[model.irq_cpu] * share, 0.0, 1.0)


# --------------------------------------------------------------------------- ours


def lower_bound(model: LoadModel) -> float:
    """No table gives a smaller maximum CPU load (over the IRQ CPUs)."""
    cpus = model.irq_cpus
    fixed = model.fixed()[cpus]
    bl = model.bucket_load
    total = float(bl.sum())
    lb = max(float(fixed.max()), float(bl.max()) + float(fixed.min()) if bl.size else 0.0)
    # water-filling: smallest M with sum(max(0, M - fixed)) >= total
    f = np.sort(fixed)
    for k in range(1, f.size + 1):
        m = (total + f[:k].sum()) / k
        if k == f.size or m <= f[k]:
            lb = max(lb, float(m))
            break
    return lb


def _cpu_of(model: LoadModel, table) -> np.ndarray:
    return model.irq_cpu[np.asarray(table, np.int64)]


def local_search(cpu_of: np.ndarray, bl: np.ndarray, fixed: np.ndarray, cpus: np.ndarray,
                 max_steps: int = 20000) -> np.ndarray:
    """Move/swap buckets between CPU pairs while it lowers the pair's larger load.

    Every accepted step keeps both loads below the pair's old maximum and brings them
    closer, so the maximum never rises and the sum of squares strictly falls.
    """
    a_of = cpu_of.copy()
    loads = fixed + np.bincount(a_of, weights=bl, minlength=fixed.size)
    eps = 1e-12 * max(1.0, float(bl.sum()))
    for _ in range(max_steps):
        order = cpus[np.argsort(-loads[cpus], kind="stable")]
        done = False
        for ia, a in enumerate(order):
            ina = np.nonzero(a_of == a)[0]
            if ina.size == 0:
                continue
            for b in order[::-1][: order.size - ia - 1]:
                d = loads[a] - loads[b]
                if d <= eps:
                    break
                inb = np.nonzero(a_of == b)[0]
                # move x: new gap |d - 2x| < d  <=>  0 < x < d
                best, gap = None, d - eps
                x = bl[ina]
                ok = (x > eps) & (x < d - eps)
                if ok.any():
                    g = np.abs(d - 2 * x)
                    g[~ok] = np.inf
                    k = int(np.argmin(g))
                    if g[k] < gap:
                        best, gap = ("move", ina[k], -1), g[k]
                if inb.size:
                    diff = x[:, None] - bl[inb][None, :]
                    ok = (diff > eps) & (diff < d - eps)
                    if ok.any():
                        g = np.abs(d - 2 * diff)
                        g[~ok] = np.inf
                        k = int(np.argmin(g))
                        ka, kb = divmod(k, inb.size)
                        if g[ka, kb] < gap:
                            best, gap = ("swap", ina[ka], inb[kb]), g[ka, kb]
                if best is not None:
                    _, i, j = best
                    a_of[i] = b
                    loads[a] -= bl[i]
                    loads[b] += bl[i]
                    if j >= 0:
                        a_of[j] = a
                        loads[b] -= bl[j]
                        loads[a] += bl[j]
                    done = True
                    break
            if done:
                break
        if not done:
            break
    return a_of


def lpt(bl: np.ndarray, fixed: np.ndarray, cpus: np.ndarray, home: np.ndarray) -> np.ndarray:
    """Longest processing time first: heaviest bucket to the least loaded CPU (ties: the
    bucket's current CPU, then the lower CPU number)."""
    loads = fixed.astype(float).copy()
    out = home.copy()
    for i in sorted(range(bl.size), key=lambda i: (-bl[i], i)):
        lmin = loads[cpus].min()
        cands = cpus[loads[cpus] <= lmin + 1e-15]
        c = int(home[i]) if home[i] in cands else int(cands[0])
        out[i] = c
        loads[c] += bl[i]
    return out


def _stats(cpu_of, bl, fixed, cpus, home) -> tuple[float, float, int]:
    loads = (fixed + np.bincount(cpu_of, weights=bl, minlength=fixed.size))[cpus]
    return (float(loads.max()), float((loads ** 2).sum()),
            int(np.count_nonzero(cpu_of != home)))


def relabel(cpu_of, bl, fixed, cpus, home, tol: float = 1e-3) -> np.ndarray:
    """Exchange whole bucket sets between CPU pairs when that sends more buckets home
    without raising the maximum (or the sum of squares beyond ``tol``): an LPT
    assignment lands its sets on arbitrary CPUs."""
    a_of = cpu_of.copy()
    loads = fixed + np.bincount(a_of, weights=bl, minlength=fixed.size)
    mx = float(loads[cpus].max())
    budget = tol * float((loads[cpus] ** 2).sum())
    cl = [int(c) for c in cpus]
    for _ in range(len(cl) * len(cl)):
        changed = False
        for ia, a in enumerate(cl):
            for b in cl[ia + 1:]:
                ina, inb = a_of == a, a_of == b
                ha, hb = home[ina], home[inb]
                gain = (int(np.count_nonzero(ha == b)) + int(np.count_nonzero(hb == a))
                        - int(np.count_nonzero(ha == a)) - int(np.count_nonzero(hb == b)))
                if gain <= 0:
                    continue
                la, lb_ = loads[a] - fixed[a], loads[b] - fixed[b]
                na, nb = fixed[a] + lb_, fixed[b] + la
                if max(na, nb) > mx + 1e-15:
                    continue
                dsq = na ** 2 + nb ** 2 - loads[a] ** 2 - loads[b] ** 2
                if dsq > budget:
                    continue
                budget -= max(dsq, 0.0)
                a_of[ina], a_of[inb] = b, a
                loads[a], loads[b] = na, nb
                changed = True
        if not changed:
            break
    return a_of


def move_back(cpu_of, bl, fixed, cpus, home, tol: float = 1e-3) -> np.ndarray:
    """Send moved buckets home where that raises neither the maximum nor (beyond
    ``tol``, relative) the sum of squares: fewer buckets moved for the same balance."""
    a_of = cpu_of.copy()
    loads = fixed + np.bincount(a_of, weights=bl, minlength=fixed.size)
    mx = float(loads[cpus].max())
    sq0 = float((loads[cpus] ** 2).sum())
    budget = tol * sq0
    for i in sorted(np.nonzero(a_of != home)[0], key=lambda i: (bl[i], i)):
        a, h = int(a_of[i]), int(home[i])
        if h not in cpus:
            continue
        na, nh = loads[a] - bl[i], loads[h] + bl[i]
        if nh > mx + 1e-15:
            continue
        dsq = (na ** 2 + nh ** 2) - (loads[a] ** 2 + loads[h] ** 2)
        if dsq <= budget:
            budget -= max(dsq, 0.0)
            a_of[i] = h
            loads[a], loads[h] = na, nh
    return a_of


def cpu_to_table(model: LoadModel, cpu_of: np.ndarray, current) -> np.ndarray:
    """Queues for a bucket -> CPU assignment: a bucket keeps its queue when that queue's
    IRQ is on the chosen CPU; otherwise it joins the CPU's least-loaded queue."""
    cur = np.asarray(current, np.int64)
    table = np.where(model.irq_cpu[cur] == cpu_of, cur, -1)
    qload = np.bincount(table[table >= 0], weights=model.bucket_pps[table >= 0],
                        minlength=model.nq)
    for i in sorted(np.nonzero(table < 0)[0], key=lambda i: (-model.bucket_pps[i], i)):
        qs = np.nonzero(model.irq_cpu == cpu_of[i])[0]
        q = int(qs[np.argmin(qload[qs])])
        table[i] = q
        qload[q] += model.bucket_pps[i]
    return table


def optimise(model: LoadModel, current, starts: dict | None = None, *,
             tol: float = 0.001) -> dict:
    """Our table: local search from LPT, from the current table and from ``starts``.

    Selection: the smallest maximum load; among candidates within ``tol`` x mean of it
    (rounding) the smallest sum of squares, within ``tol`` relative; then the fewest
    buckets moved. The choice is never above the maximum of any
    start's own table (so never worse than RSS++ when its table is a start).
    """
    cur = np.asarray(current, np.int64)
    bl, fixed, cpus = model.bucket_load, model.fixed(), model.irq_cpus
    home = _cpu_of(model, cur)
    ceiling = math.inf
    cands = {"lpt": lpt(bl, fixed, cpus, home), "current": home.copy()}
    for name, t in (starts or {}).items():
        cands[name] = _cpu_of(model, t)
        ceiling = min(ceiling, _stats(cands[name], bl, fixed, cpus, home)[0])
    rows = []
    for name, c in cands.items():
        c = local_search(c, bl, fixed, cpus)
        c = move_back(relabel(c, bl, fixed, cpus, home), bl, fixed, cpus, home)
        rows.append((*_stats(c, bl, fixed, cpus, home), name, c))
    mean = float(model.cpu_loads(cur)[cpus].mean()) or 1.0
    best_max = min(r[0] for r in rows)
    ok = [r for r in rows if r[0] <= min(best_max + tol * mean, ceiling + 1e-12)]
    best_sq = min(r[1] for r in ok)
    ok = [r for r in ok if r[1] <= best_sq * (1 + tol)]
    pick = min(ok, key=lambda r: (r[2], r[0], r[1]))
    table = cpu_to_table(model, pick[4], cur)
    return {"table": table, "start": pick[3], "moved": buckets_moved(table, cur),
            "candidates": {r[3]: {"max": r[0], "moved": r[2]} for r in rows}}


# --------------------------------------------------------------------------- weight form


def _greedy_fits(w: np.ndarray, qbase: np.ndarray, limit: float) -> bool:
    i, n = 0, w.size
    for b in qbase:
        room = limit - b
        if room < -1e-15:
            continue
        s = 0.0
        while i < n and s + w[i] <= room + 1e-15:
            s += w[i]
            i += 1
    return i == n


def contiguous(model: LoadModel) -> dict:
    """Best table ``ethtool -X weight`` can write: contiguous runs, queue 0 first.

    A queue's cost is its CPU's fixed load (shared among the CPU's queues) plus its run.
    """
    w = model.bucket_load
    fixed = model.fixed()
    nq_on = np.bincount(model.irq_cpu, minlength=model.ncpu)
    qbase = fixed[model.irq_cpu] / nq_on[model.irq_cpu]
    lo = max(float(qbase.max()), float(w.max()) + float(qbase.min()))
    hi = float(qbase.max()) + float(w.sum())
    for _ in range(100):
        mid = (lo + hi) / 2
        if _greedy_fits(w, qbase, mid):
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    limit = hi * (1 + 1e-9) + 1e-15
    # DP: least sum of squared queue loads with every queue <= limit
    B, nq = w.size, model.nq
    P = np.concatenate([[0.0], np.cumsum(w)])
    f = np.full(B + 1, np.inf)
    f[0] = 0.0
    arg = np.zeros((nq, B + 1), np.int64)
    for j in range(nq):
        g = np.full(B + 1, np.inf)
        for i in range(B + 1):
            run = qbase[j] + P[i] - P[: i + 1]
            cost = f[: i + 1] + run ** 2
            cost[run > limit] = np.inf
            t = int(np.argmin(cost))
            g[i], arg[j, i] = cost[t], t
        f = g
    if not np.isfinite(f[B]):  # numerical corner: fall back to the greedy partition
        return _greedy_table(w, qbase, limit)
    ends = [B]
    for j in range(nq - 1, -1, -1):
        ends.append(int(arg[j, ends[-1]]))
    bounds = ends[::-1]  # bounds[j]..bounds[j+1] is queue j's run
    weights = [bounds[j + 1] - bounds[j] for j in range(nq)]
    return _weights_table(weights, B)


def _greedy_table(w, qbase, limit) -> dict:
    weights, i = [], 0
    for b in qbase:
        s, start = 0.0, i
        while i < w.size and s + w[i] <= limit - b + 1e-15:
            s += w[i]
            i += 1
        weights.append(i - start)
    weights[-1] += w.size - i
    return _weights_table(weights, w.size)


def _weights_table(weights: list[int], size: int) -> dict:
    while len(weights) > 1 and weights[-1] == 0:
        weights = weights[:-1]
    g = math.gcd(*weights) or 1
    small = [x // g for x in weights]
    table = indirection.weight_table(size, weights)
    if np.array_equal(indirection.weight_table(size, small), table):
        weights = small
    return {"table": table, "weights": weights}


def rxfh_form(table, nq: int) -> dict | None:
    """``{'equal': N}`` or ``{'weight': [...]}`` (``rxlab.nic.indirection.rxfh_form``)."""
    return indirection.rxfh_form(table, nq)
