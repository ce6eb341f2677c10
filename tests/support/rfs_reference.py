"""Reference implementations of the kernel's RFS and aRFS rules, for the tests to compare
the simulator against.

Written from a reading of the kernel only (Linux 6.19 and net-next of March 2026:
``get_rps_cpu``, ``set_rps_cpu``, ``rps_may_expire_flow`` in net/core/dev.c, ``hash_32`` in
include/linux/hash.h, ``ice_rx_flow_steer`` in drivers/net/ethernet/intel/ice/ice_arfs.c,
``mlx5e_rx_flow_steer`` in drivers/net/ethernet/mellanox/mlx5/core/en_arfs.c), never from
rxlab's code or outputs: pure-Python ``ref_*`` functions and ``RefKernel`` with the ice and
mlx5 driver models.
"""

from __future__ import annotations

# ------------------------------------------------------------------ constants -------
U32 = 0xFFFFFFFF
GOLDEN_RATIO_32 = 0x61C88647  # include/linux/hash.h
GOLDEN_RATIO_64 = 0x61C8864680B583EB  # hash_long on 64-bit (include/linux/hash.h)
RPS_NO_CPU = 0xFFFF  # include/net/rps.h
RPS_NO_FILTER = 0xFFFF
ICE_BUCKETS = 1024  # ICE_MAX_ARFS_LIST (ice_arfs.h)
ICE_UDP_EXPIRY_NS = 5_000_000_000  # ICE_ARFS_TIME_DELTA_EXPIRATION = 5000 ms
MLX5_HASH_SIZE = 256  # ARFS_HASH_SIZE (en_arfs.c)
MLX5_EXPIRY_QUOTA = 60  # MLX5E_ARFS_EXPIRY_QUOTA


# ------------------------------------------------------- reference arithmetic -------
def s32(a: int, b: int) -> int:
    """(int)(a - b) on u32 counters, as the kernel compares them."""
    d = (int(a) - int(b)) & U32
    return d - (1 << 32) if d & 0x80000000 else d


def ref_hash_32(v: int, bits: int) -> int:
    """hash_32(v, b) = ((v * 0x61C88647) mod 2^32) >> (32 - b), b in 1..32 (hash.h)."""
    assert 1 <= bits <= 32
    return ((int(v) * GOLDEN_RATIO_32) & U32) >> (32 - bits)


def ref_reciprocal_scale(v: int, n: int) -> int:
    return (int(v) * int(n)) >> 32


def roundup_pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def hash32_rule(version: str) -> bool:
    """Per-queue slot / flow_id is hash_32 since v6.15 (f3483c8e1da6), hash & mask before."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (6, 15)


def protect_rule(version: str) -> bool:
    """Active filters are protected since v6.18 (97bcc5b6f454)."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (6, 18)


def ref_rfs_slot(h: int, log: int, hash32: bool) -> int:
    """Slot of a flow in a per-queue table of 2**log entries (``rfs_slot``, net/core/dev.c)."""
    return ref_hash_32(h, log) if hash32 else int(h) & ((1 << log) - 1)


def ref_active_limit(log: int, hash32: bool) -> int:
    """rps_flow_is_active threshold: 10 << log since v6.15, 10 * mask before (net/core/dev.c)."""
    return (10 << log) if hash32 else 10 * ((1 << log) - 1)


def ref_is_active(head: int, last_qtail: int, cpu: int, ncpu: int, log: int,
                  hash32: bool) -> bool:
    return cpu < ncpu and s32(head, last_qtail) < ref_active_limit(log, hash32)


def ref_mlx5_bucket(sport: int, dport: int) -> int:
    """arfs_hash_bucket: l = sport | (dport << 2) on the __be16 values as a little-endian
    CPU reads them (byte-swapped), then hash_long(l, 8) on 64-bit (en_arfs.c)."""
    be = lambda x: ((x & 0xFF) << 8) | (x >> 8)  # noqa: E731
    l_ = be(sport) | (be(dport) << 2)
    return ((l_ * GOLDEN_RATIO_64) & ((1 << 64) - 1)) >> 56


# ------------------------------------------------------------ reference kernel -------
class RefEntry:
    """One driver filter-list entry (ice_arfs_entry / mlx5 arfs_rule)."""

    def __init__(self, flow, flow_id, fltr_id, q, t):
        self.flow, self.flow_id, self.fltr_id, self.q = flow, flow_id, fltr_id, q
        self.active = False  # INACTIVE (ice) / work queued (mlx5) until the service runs
        self.time = t

    def key(self):
        return (self.flow, self.flow_id, self.fltr_id, self.q, self.active)


class RefKernel:
    """get_rps_cpu (RFS branch, 3.4/4.4), set_rps_cpu (4.4, 5.1 with the Feb-2026 fix),
    rps_flow_is_active / rps_may_expire_flow (5.1/5.2), and the ice (5.3) or mlx5 (5.4)
    ndo_rx_flow_steer with their service/work programming and expiry scans.

    ``model`` is None (no aRFS), "ice-hash-match", "ice-tuple-match" or "mlx5".
    ``cpu_rmap``: CPU -> rx queue (set by IRQ affinity in the kernel, given here); -1 = none.
    ``flow_bucket``: flow -> mlx5 bucket (table x 256 + hash_long); ice uses hash & 1023.
    """

    def __init__(self, ncpu, nq, log, version, model=None, cpu_rmap=None, sock_entries=4096,
                 flow_udp=None, flow_bucket=None, rps_map=()):
        self.ncpu, self.nq = ncpu, nq
        self.rps_map = list(rps_map)  # rps_cpus of every queue (same map for all)
        self.logs = list(log) if isinstance(log, (list, tuple)) else [log] * nq
        self.hash32 = hash32_rule(version)
        self.protect = protect_rule(version)
        self.model = model
        self.cpu_rmap = list(cpu_rmap) if cpu_rmap is not None else list(range(ncpu))
        self.cpu_mask = roundup_pow2(ncpu) - 1
        self.sock_mask = sock_entries - 1
        self.sock = {}  # idx -> value (missing: RPS_NO_CPU)
        self.head = [0] * ncpu
        self.tail = [0] * ncpu
        # per-queue tables: dict slot -> [cpu, filter, last_qtail, hash]
        self.tab = [dict() for _ in range(nq)]
        self.entries: list[RefEntry] = []  # in bucket order: newest first per bucket
        self.bucket_of = {}  # id(entry) -> bucket
        self.last_fltr_id = 0
        self.cnt = {"add": 0, "update": 0, "skip": 0, "expire": 0, "calls": 0,
                    "moves": 0, "held": 0}
        self.hw = {}  # flow -> queue of its programmed filter
        self.flow_udp = flow_udp or {}
        self.flow_bucket = flow_bucket or {}

    # -- tables ---------------------------------------------------------------------
    def ent(self, q, slot):
        return self.tab[q].setdefault(slot, [RPS_NO_CPU, RPS_NO_FILTER, 0, 0])

    def record(self, h, cpu):
        """rps_record_sock_flow (include/net/rps.h)."""
        self.sock[h & self.sock_mask] = ((h & ~self.cpu_mask) & U32) | cpu

    def is_active(self, q, slot, cpu):
        e = self.ent(q, slot)
        return ref_is_active(self.head[cpu] if cpu < self.ncpu else 0, e[2], cpu, self.ncpu,
                             self.logs[q], self.hash32)

    # -- get_rps_cpu with its RFS branch (net/core/dev.c) ----------------------------
    def get_rps_cpu(self, rxq, h, flow, t=0):
        """Returns (cpu or -1, (queue, slot) of the rflow to record the enqueue in, or
        None for the kernel's voidflow)."""
        if self.logs[rxq] == 0 and not self.rps_map:
            return -1, None
        if h == 0:
            return -1, None
        if self.logs[rxq] > 0:
            ident = self.sock.get(h & self.sock_mask, RPS_NO_CPU)
            if ((ident ^ h) & ~self.cpu_mask & U32) == 0:
                next_cpu = ident & self.cpu_mask
                slot = ref_rfs_slot(h, self.logs[rxq], self.hash32)
                rflow = (rxq, slot)
                tcpu = self.ent(rxq, slot)[0]
                if tcpu != next_cpu:
                    if tcpu >= self.ncpu or s32(self.head[tcpu], self.ent(rxq, slot)[2]) >= 0:
                        if tcpu < self.ncpu:
                            self.cnt["moves"] += 1
                        tcpu = next_cpu
                        rflow = self.set_rps_cpu(rxq, slot, next_cpu, h, flow, t)
                    else:
                        self.cnt["held"] += 1
                if tcpu < self.ncpu:
                    return tcpu, rflow
        if self.rps_map:
            return self.rps_map[ref_reciprocal_scale(h, len(self.rps_map))], None
        return -1, None

    def set_rps_cpu(self, q, slot, next_cpu, h, flow, t):
        rq, rs = q, slot
        if next_cpu < self.ncpu:
            if self.model is not None:
                rxq_index = self.cpu_rmap[next_cpu]
                if rxq_index >= 0 and rxq_index != q and self.logs[rxq_index] > 0:
                    flow_id = ref_rfs_slot(h, self.logs[rxq_index], self.hash32)
                    tgt = self.ent(rxq_index, flow_id)
                    t_cpu = tgt[0]
                    protect = (self.protect and tgt[1] != RPS_NO_FILTER
                               and self.is_active(rxq_index, flow_id, t_cpu)
                               and (h != tgt[3] or next_cpu == t_cpu))
                    if not protect:
                        self.cnt["calls"] += 1
                        rc = self.steer(flow, h, rxq_index, flow_id, t)
                        if rc >= 0:
                            old = self.ent(q, slot)
                            rq, rs = rxq_index, flow_id
                            tgt[1] = rc
                            tgt[3] = h
                            if old[1] == rc:
                                old[1] = RPS_NO_FILTER
            self.ent(rq, rs)[2] = self.head[next_cpu]
        self.ent(rq, rs)[0] = next_cpu
        return (rq, rs)

    def enqueue(self, cpu, rflow):
        """enqueue_to_backlog: tail += 1 and *qtail = tail (net/core/dev.c)."""
        self.tail[cpu] = (self.tail[cpu] + 1) & U32
        if rflow is not None:
            self.ent(*rflow)[2] = self.tail[cpu]

    def dequeue(self, cpu, n):
        """process_backlog: head += work once per call (net/core/dev.c)."""
        self.head[cpu] = (self.head[cpu] + n) & U32

    # -- drivers ------------------------------------------------------------------------
    def bucket(self, flow, h):
        if self.model == "mlx5":
            return self.flow_bucket[flow]
        return h & (ICE_BUCKETS - 1)

    def steer(self, flow, h, rxq, flow_id, t):
        b = self.bucket(flow, h)
        for e in [e for e in self.entries if self.bucket_of[id(e)] == b]:
            if self.model == "mlx5":
                if e.flow != flow:  # arfs_cmp: full tuple; flow_id not used
                    continue
                if e.q == rxq or not e.active:  # same rxq, or its work item is busy
                    self.cnt["skip"] += 1
                    return e.fltr_id
                e.q = rxq
                e.active = False  # work queued: rewrite the rule
                self.cnt["update"] += 1
                return e.fltr_id
            if e.flow_id != flow_id:
                continue
            if self.model == "ice-tuple-match" and e.flow != flow:
                continue  # ice_arfs_cmp
            if e.q == rxq or not e.active:
                self.cnt["skip"] += 1
                return e.fltr_id
            e.q = rxq
            e.active = False
            self.cnt["update"] += 1
            return e.fltr_id
        if self.model == "mlx5":
            fid = self.last_fltr_id % 0xFFFF
            self.last_fltr_id += 1
        else:
            self.last_fltr_id += 1
            fid = self.last_fltr_id % 0xFFFF
        e = RefEntry(flow, flow_id, fid, rxq, t)
        self.entries.insert(0, e)  # head of the bucket
        self.bucket_of[id(e)] = b
        self.cnt["add"] += 1
        return fid

    def may_expire(self, q, flow_id, filter_id):
        """rps_may_expire_flow (net/core/dev.c)."""
        log = self.logs[q]
        if log == 0 or flow_id >= (1 << log):
            return True
        e = self.ent(q, flow_id)
        if e[1] != filter_id:
            return True
        return not self.is_active(q, flow_id, e[0])

    def service(self, t):
        """ice_sync_arfs_fltrs' add half / the mlx5 work items: program queued entries."""
        for e in self.entries:
            if not e.active:
                e.active = True
                e.time = t
                self.hw[e.flow] = e.q

    def expire_scan(self, t):
        """Delete expired programmed entries (ice: all; mlx5: at most 62 per scan)."""
        quota = 0
        for b in sorted({self.bucket_of[id(e)] for e in self.entries}):
            for e in [e for e in self.entries if self.bucket_of[id(e)] == b]:
                if not e.active:
                    continue
                exp = self.may_expire(e.q, e.flow_id, e.fltr_id)
                if self.model != "mlx5" and self.flow_udp.get(e.flow, False):
                    exp = exp or t - e.time >= ICE_UDP_EXPIRY_NS
                if exp:
                    self.entries.remove(e)
                    self.hw.pop(e.flow, None)
                    self.cnt["expire"] += 1
                    if self.model == "mlx5":
                        stop = quota > MLX5_EXPIRY_QUOTA  # if (quota++ > QUOTA) break
                        quota += 1
                        if stop:
                            return
