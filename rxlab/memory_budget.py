"""The memory a scenario needs, known before anything is allocated, and the limit on it.

``estimate(sc)`` adds up, from the validated scenario alone, the bytes of every array
``rxlab.build`` allocates (per-flow tables, rx rings, backlogs, socket queues, RFS/aRFS
and flow-limit tables, cpumap queues, per-CPU state, the time series) as an upper bound,
plus what exists only while the model is built and run (the copy into the arena, flow
building, traffic chunks, the result's series lists) and the interpreter with the
compiled loop. ``check(sc)`` refuses a scenario whose estimate exceeds the limit with one
line naming the field whose term is largest.

The limit is ``--max-memory`` (``RXLAB_MAX_MEMORY`` in the environment, so that worker
processes inherit it), else half of the memory this process may use: the smallest of
physical memory, the cgroup's memory limit and RLIMIT_AS.

The time series are bounded too: at most ``MAX_INTERVALS`` intervals, fewer on many
CPUs (``SERIES_BUDGET``); a longer run gets a longer interval, the next 1-2-5 value,
and the result says so. Memory is then bounded by the scenario, not by run length.
"""

from __future__ import annotations

import os
import re
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rxlab.errors import UsageError
from rxlab.kernel.counters import CPU_CATS, TS_PKT
from rxlab.kernel.drop_reasons import N_DROP_SLOTS
from rxlab.mechanisms import CPUMAP, FLOW_LIMIT, NIC, RFS, RPS

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
ENV = "RXLAB_MAX_MEMORY"
DEFAULT_SHARE = 0.5  # of the memory this process may use
# interpreter, numpy, numba and the compiled loop loaded from the cache: ~106 + ~58 MB
# measured (docs/performance.md), with room for the per-run Python objects
OVERHEAD = 256 * MiB

MAX_INTERVALS = 10_000
SERIES_BUDGET = 64 * MiB  # series arrays plus the result's lists, on many CPUs
# int64 per interval: ts_cpu's per CPU; ts_pkt's and ts_drop's (their declared columns)
SERIES_ARRAY_CPU = len(CPU_CATS) * 8
SERIES_ARRAY_FIXED = (len(TS_PKT) + N_DROP_SLOTS) * 8
# the result's lists per interval: cpu_busy and cpu_softirq (float objects, temporaries)
SERIES_LIST_CPU, SERIES_LIST_FIXED = 112, 400

# bytes per flow the model keeps: FlowTable columns (64), the FLOW record (96), the
# FLOW_SEQ record (24), ArfsState.fdir_queue (8); aRFS adds 2 filter entries of 10 x 8
FLOW_BYTES = 64 + 96 + 24 + 8
ARFS_ENTRY = 10 * 8
FLOW_TRANSIENT = 400  # per flow while built: generation, steering, record stacking
CAPTURE_SCAN = 3 * 80  # per capture flow: the scanner's key/count/hash tables, doubling
MIN_FLOW_RECORD = 16 + 20 + 8  # a record header, an IPv4 header and a UDP header
SLOT_BYTES = 40  # a queued packet: one SKB record (kernel/state.py), 3 int64 + 3 int32
PACKET_BYTES = 8 + 4 + 4  # a generated packet: time, flow, size
CHUNK_BYTES = 3 * (1 << 18) * (PACKET_BYTES + 17)  # chunks, shaped (wire, NIC, overrun)


@dataclass(frozen=True)
class Term:
    field: str  # the scenario field that sizes it
    arrays: int  # bytes of arrays build() keeps
    extra: int  # bytes that exist only while the model is built or run
    what: str
    fix: str

    @property
    def peak(self) -> int:
        return 2 * self.arrays + self.extra  # the arrays are copied into one arena


@dataclass(frozen=True)
class Estimate:
    terms: list[Term]
    interval_ns: int  # the time series' effective interval
    intervals: int
    notice: str | None = None  # why the interval is longer than asked, if it is

    @property
    def arrays(self) -> int:
        """Upper bound of the bytes of every array reachable from the built model."""
        return sum(t.arrays for t in self.terms)

    @property
    def total(self) -> int:
        return sum(t.peak for t in self.terms)

    def dominant(self) -> Term:
        return max(self.terms, key=lambda t: t.peak)

    def as_dict(self) -> dict:
        return {"total_bytes": self.total, "arrays_bytes": self.arrays,
                "terms": {t.field: t.peak for t in self.terms if t.peak}}


@dataclass(frozen=True)
class Limit:
    nbytes: int
    source: str  # how the user set it, for the message


# --- sizes as text ------------------------------------------------------------------

_UNITS = {"": 1, "b": 1, "k": KiB, "kib": KiB, "kb": 1000, "m": MiB, "mib": MiB,
          "mb": 1000**2, "g": GiB, "gib": GiB, "gb": 1000**3, "t": TiB, "tib": TiB,
          "tb": 1000**4}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text, what: str = "--max-memory") -> int:
    """'8GiB', '512MiB', '2G' (binary), '2GB' (decimal) or plain bytes -> bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        n = text
    else:
        m = _SIZE_RE.match(str(text))
        unit = _UNITS.get(m.group(2).lower()) if m else None
        if unit is None:
            raise UsageError(f"{what} {text!r}: not a size; give e.g. 8GiB, 512MiB, 2G or "
                             "a number of bytes")
        n = int(float(m.group(1)) * unit)
    if n < 64 * MiB:
        raise UsageError(f"{what} {text!r}: below 64 MiB, less than rxlab itself needs; "
                         "give e.g. 4GiB")
    return n


def format_size(n: float) -> str:
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 10 else f"{v:.1f} {unit}"
    return f"{int(n)} B"


# --- the limit ----------------------------------------------------------------------

def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def usable_memory() -> int:
    """The memory this process may use: physical memory, the cgroup limit, RLIMIT_AS."""
    sizes = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    cg = _cgroup_limit()
    if cg:
        sizes.append(cg)
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        sizes.append(soft)
    return min(sizes)


def default_limit() -> Limit:
    """``RXLAB_MAX_MEMORY`` if set (the CLI's --max-memory), else half the usable memory."""
    env = os.environ.get(ENV)
    if env:
        return Limit(parse_size(env, ENV), f"--max-memory {env}")
    n = int(usable_memory() * DEFAULT_SHARE)
    return Limit(n, f"{format_size(n)} (the default: {DEFAULT_SHARE:.0%} of the memory "
                    "this process may use)")


def resolve_limit(max_memory) -> Limit:
    """``max_memory``: None (the default), bytes, a size text, or a Limit."""
    if max_memory is None:
        return default_limit()
    if isinstance(max_memory, Limit):
        return max_memory
    n = parse_size(max_memory, "max_memory")
    return Limit(n, f"--max-memory {max_memory}")


@contextmanager
def process_limit(text: str | None):
    """The CLI's --max-memory (None: keep the default) for the commands run inside: set
    as ``RXLAB_MAX_MEMORY`` so that worker processes inherit it; restored afterwards."""
    if text is None:
        yield
        return
    parse_size(text)
    old = os.environ.get(ENV)
    os.environ[ENV] = str(text).strip()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


# --- the time series ----------------------------------------------------------------

def max_intervals(ncpu: int) -> int:
    per = ncpu * (SERIES_ARRAY_CPU + SERIES_LIST_CPU) + SERIES_ARRAY_FIXED + SERIES_LIST_FIXED
    return max(10, min(MAX_INTERVALS, SERIES_BUDGET // per))


def _step_125(ns: int) -> int:
    """The smallest 1-2-5 value (1, 2, 5, 10, 20, ... ns) >= ns."""
    p = 1
    while True:
        for m in (1, 2, 5):
            if m * p >= ns:
                return m * p
        p *= 10


def series_intervals(sc) -> tuple[int, int, str | None]:
    """(interval ns, number of intervals, notice or None) of the scenario's time series."""
    total_ns = int(round((sc.duration + sc.drain) * 1e9))
    cap = max_intervals(sc.host.cpus)
    want = int(round(sc.metrics.interval * 1e9))
    if want >= 1 and -(-total_ns // want) <= cap:
        return want, max(1, -(-total_ns // want)), None
    ns = _step_125(max(want, -(-total_ns // cap), 1))
    n = max(1, -(-total_ns // ns))
    would = f"{-(-total_ns // want):,} intervals" if want >= 1 else "intervals under 1 ns"
    notice = (f"metrics.interval: {sc.metrics.interval:g} s over {total_ns / 1e9:g} s "
              f"(duration + drain) would give {would}; the series keeps at most {cap:,} "
              f"on {sc.host.cpus} CPUs, so its interval is {ns / 1e9:g} s ({n:,} intervals)")
    return ns, n, notice


# --- the estimate -------------------------------------------------------------------

def _pow2(n: int) -> int:
    return 1 << (max(int(n), 1) - 1).bit_length()


def _capture_flows(sc, capture) -> int:
    if capture is not None:
        return len(capture.flows)
    try:
        size = os.stat(sc.traffic.pcap.file).st_size
    except OSError:
        size = 0  # open_capture reports it
    return max(1, size // MIN_FLOW_RECORD)  # every flow needs at least one record


def _declared(mech, sc, what: str, fix: str) -> Term:
    """The arrays a mechanism declares for ``sc`` (rxlab/mechanisms/), named after the
    field that sizes them."""
    return _term(mech.sized_by, mech.nbytes(sc), what=what, fix=fix)


def _term(field, arrays, extra=0, what="", fix="") -> Term:
    """A Term in whole bytes (a generation block is a float number of packets)."""
    return Term(field, int(arrays), int(extra), what, fix)


def _traffic_terms(sc, capture) -> Iterator[Term]:
    """The flows of the capture or of each group, and each group's generation blocks."""
    per_flow = FLOW_BYTES + (2 * ARFS_ENTRY if sc.nic.arfs else 0)
    if sc.traffic.pcap is not None:
        n = _capture_flows(sc, capture)
        yield _term("traffic.pcap.file", n * per_flow, n * (FLOW_TRANSIENT + CAPTURE_SCAN),
                    f"up to {n:,} flows in the capture", "replay a smaller capture")
    for i, g in enumerate(sc.traffic.groups):
        yield _term(f"traffic.groups[{i}].flows", g.flows * per_flow,
                    g.flows * FLOW_TRANSIENT, f"{g.flows:,} flows", "use fewer flows")
        # generation blocks of ~2**15 packets, at least 1 us of traffic (stream.py), and
        # never more than the group offers in the whole run
        span = max(0.0, min(g.stop or sc.duration, sc.duration) - g.start)
        block = min(max(1 << 15, g.rate.pps * 1e-6), g.rate.pps * span + 2)
        yield _term(f"traffic.groups[{i}].rate.pps", 0, 4 * 1.25 * block * PACKET_BYTES,
                    f"{g.rate.pps:g} packets/s generated in blocks of 1 us",
                    "use a lower rate")


def _ring_terms(sc) -> Iterator[Term]:
    """The rx rings and the per-CPU backlog queues."""
    ncpu, nq = sc.host.cpus, sc.nic.queues
    R = NIC.state(sc)["ring"].shape[1]
    yield _declared(NIC, sc, what=f"rx rings: {nq:,} queues x {R:,} descriptors",
                    fix="use a smaller nic.ring_size or fewer nic.queues")
    bl = RPS.state(sc)["bl"]
    yield _declared(RPS, sc, what=f"backlog queues: {ncpu:,} CPUs x {bl.shape[1]:,} slots",
                    fix="use a smaller netdev_max_backlog (the kernel's default is 1000)")


def _app_terms(sc) -> Iterator[Term]:
    """Per application: its socket queues or AF_XDP rings, then its threads' records."""
    from rxlab.kernel import constants as K
    from rxlab.kernel.state import APP_THREAD, SOCK

    ncpu = sc.host.cpus
    # applications: one thread and one socket per CPU listed
    moves = [len(a.migrate) for a in sc.apps if isinstance(a.migrate, list)]
    kmax = max([1] + moves)
    for i, app in enumerate(sc.apps):
        th = len(app.cpu_list())
        xs = app.afxdp
        if xs:
            slots = _pow2(min(xs.rx_ring, xs.fill_ring, xs.umem_frames))
            yield _term(f"apps[{i}].afxdp.rx_ring", th * slots * SLOT_BYTES,
                        what=f"{th:,} AF_XDP rings of {slots:,} slots",
                        fix="use smaller rings")
        else:
            slots = _pow2(app.rcvbuf // K.SKB_TRUESIZE_MIN + 2)
            yield _term(f"apps[{i}].rcvbuf", th * slots * SLOT_BYTES,
                        what=f"{th:,} socket queues of {slots:,} packets",
                        fix="use a smaller rcvbuf (the kernel's rmem_default is 212992)")
        # the socket and thread records, sock_off, calendar slots, cpu_threads and
        # mig_set rows, explicit moves; config and Model.threads entries
        rec = SOCK.itemsize + APP_THREAD.itemsize
        yield _term(f"apps[{i}].cpus", th * (rec + 8 + 128 + 16 * ncpu + 16 * kmax),
                    th * 600, f"{th:,} threads on {ncpu:,} CPUs", "use fewer threads")


def _flow_table_terms(sc) -> Iterator[Term]:
    """RFS's rps_sock_flow_table and rps_dev_flow tables, flow limit's, aRFS filters."""
    ncpu, nq, k, arfs = sc.host.cpus, sc.nic.queues, sc.kernel, sc.nic.arfs
    rfs = RFS.state(sc)
    entries = rfs["sock_flow"].nbytes
    yield _term("kernel.rps_sock_flow_entries", entries,
                what=f"rps_sock_flow_table of {rfs['sock_flow'].shape[0]:,} entries",
                fix="use a smaller table")
    yield _term(RFS.sized_by, RFS.nbytes(sc) - entries,
                what=f"rps_dev_flow tables: {nq:,} queues x {rfs['dev'].shape[1]:,} entries",
                fix="use smaller tables")
    yield _declared(FLOW_LIMIT, sc,
                    what=f"flow-limit tables: {ncpu:,} CPUs x {k.flow_limit_table_len:,} "
                         "buckets", fix="use a smaller table")
    if arfs:
        yield _term("nic.arfs.capacity", arfs.capacity * ARFS_ENTRY + 2 * 1024 * 8,
                    what=f"{arfs.capacity:,} aRFS filters", fix="use a smaller capacity")


def _xdp_terms(sc) -> Iterator[Term]:
    """The XDP rules' per-CPU counters and the cpumap entries' queues."""
    ncpu = sc.host.cpus
    nr = max(1, len(sc.xdp.rules) if sc.xdp else 0)
    # each rule's round-robin CPUs (Params; its per-CPU positions: cpumap's arrays)
    yield _term("xdp.rules", nr * (ncpu + 2) * 8,
                what=f"{nr:,} rules x {ncpu:,} CPUs", fix="use fewer rules")
    ne = CPUMAP.state(sc)["entry"].shape[0]
    yield _declared(CPUMAP, sc, what=f"cpumap: {ncpu:,} CPUs x {ne:,} entries",
                    fix="use fewer cpumap entries")


def _cpu_queue_terms(sc) -> Iterator[Term]:
    """The state every CPU and every rx queue has, whatever the scenario enables."""
    from rxlab.kernel.state import QUEUE_PARAMS, SOFTNET_DATA

    ncpu, nq = sc.host.cpus, sc.nic.queues
    # per CPU: CPU_PARAMS, softnet_data, NAPI lists, rps_ipi_list, cpu_ns, win_cpu,
    # cpu_nthreads, calendar slots, cpumap flush count, rps_map and cpu_threads rows (its
    # backlog's kthread record: the NIC's declared arrays)
    yield _term("host.cpus",
                ncpu * (16 + SOFTNET_DATA.itemsize
                        + 3 * (nq + 2) * 8 + 8 * ncpu + 80 + 8 + 128 + 8 + 8 * nq + 8),
                what=f"{ncpu:,} CPUs", fix="use fewer CPUs")
    # per queue: QUEUE_PARAMS, calendar slots (its ring, record and kthread: the NIC's)
    yield _term("nic.queues", nq * (QUEUE_PARAMS.itemsize + 128),
                what=f"{nq:,} queues", fix="use fewer queues")


def _series_term(sc, n_int: int) -> Term:
    """The time series' arrays, and the result's lists made from them."""
    ncpu = sc.host.cpus
    return _term("metrics.interval", n_int * (ncpu * SERIES_ARRAY_CPU + SERIES_ARRAY_FIXED),
                 n_int * (ncpu * SERIES_LIST_CPU + SERIES_LIST_FIXED),
                 f"{n_int:,} intervals x {ncpu:,} CPUs", "use a longer interval")


def _fixed_term(sc) -> Term:
    """What every run has, whatever the scenario's sizes: no field to make smaller."""
    from rxlab.kernel.counters import HIST_BINS, N_CNT
    from rxlab.kernel.stages import STAGES

    # the rest: stage costs, counters, latency histograms (socket, app, NIC wait),
    # calendar head, aRFS buckets and small counters; while built and run: RSS tables,
    # the config's indirection table, 64-byte alignment of ~150 arrays and the arena's
    # 2 MiB alignment, the latency histograms as lists, simulate's traffic chunks, and
    # the interpreter
    table = sc.nic.rss.table_size * (1 + len(sc.nic.rss.contexts))
    return _term("fixed", len(STAGES) * 17 + N_CNT * 8 + 3 * HIST_BINS * 8 + 16 * KiB,
                 table * 48 + 150 * 64 + (2 << 20) + 3 * HIST_BINS * 40 + CHUNK_BYTES
                 + OVERHEAD,
                 "rxlab itself and the tables of every run", "")


def estimate(sc, capture=None) -> Estimate:
    """Bytes the scenario implies, by term, computed before anything is allocated."""
    iv, n_int, notice = series_intervals(sc)
    terms = [*_traffic_terms(sc, capture), *_ring_terms(sc), *_app_terms(sc),
             *_flow_table_terms(sc), *_xdp_terms(sc), *_cpu_queue_terms(sc),
             _series_term(sc, n_int), _fixed_term(sc)]
    return Estimate(terms, iv, n_int, notice)


def check(sc, max_memory=None, capture=None) -> Estimate:
    """The estimate, or a one-line UsageError naming the dominant field and the limit."""
    est = estimate(sc, capture)
    lim = resolve_limit(max_memory)
    if est.total > lim.nbytes:
        t = est.dominant()
        where = "--max-memory" if t.field == "fixed" else t.field  # no field to blame
        raise UsageError(
            f"{where}: the scenario needs ~{format_size(est.total)}, "
            f"~{format_size(t.peak)} of it for {t.what}; limit {lim.source}; "
            f"{t.fix + ' or ' if t.fix else ''}raise --max-memory"
        )
    return est
