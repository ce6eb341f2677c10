"""Simulation state as arrays, grouped in NamedTuples named after kernel structures.

Python allocates (``rxlab.build``); jitted mechanisms mutate in place (stumpy's
``stumpi`` pattern). Leading axis = CPU, rx queue, socket or flow. Queue positions are
free-running counters as in the kernel (``input_queue_head``/``tail`` are u32 and
compared with ``s32_diff``); FIFOs are ring buffers indexed ``position & mask`` over
storage rounded up to a power of two (an integer division per access was ~1/3 of the
per-packet time); the logical capacity (ring size, socket queue) is kept apart.

Packets in flight carry their own columns (flow, NIC arrival time, per-flow sequence,
length, and the time they became visible in the queue), because a packet can stay
queued across traffic chunks.
"""

from typing import NamedTuple

import numpy as np

# --- cost stages (indices into Params.cost_ns); names match profile YAML keys --------
STAGES = (
    "hardirq",
    "irq_latency",
    "napi_poll",
    "driver_rx",
    "gro",
    "rps_enqueue",
    "stack_rx",
    "socket_enqueue",
    "cross_cpu_miss",
    "ipi_send",
    "ipi_latency",
    "ipi_recv",
    "wakeup_latency",
    "recvmsg",
    "arfs_steer",
    "arfs_program",
    # XDP and cpumap (reference sec. 9; published-figures.md sec. 1.1, 1.2, 1.7)
    "xdp_prog",
    "xdp_drop",
    "xdp_tx",
    "xdp_redirect_cpumap",
    "xdp_rx_hash",
    "xdp_flow_hash",
    "cpumap_enqueue_full",
    "cpumap_kthread",
    "skb_build",
    "sw_hash",
    "xsk_zc",
    "xsk_copy",
)
(
    C_HARDIRQ,
    C_IRQ_LATENCY,
    C_NAPI_POLL,
    C_DRIVER_RX,
    C_GRO,
    C_RPS_ENQUEUE,
    C_STACK_RX,
    C_SOCKET_ENQUEUE,
    C_CROSS_CPU,
    C_IPI_SEND,
    C_IPI_LATENCY,
    C_IPI_RECV,
    C_WAKEUP_LATENCY,
    C_RECVMSG,
    C_ARFS_STEER,
    C_ARFS_PROGRAM,
    C_XDP_PROG,
    C_XDP_DROP,
    C_XDP_TX,
    C_XDP_REDIRECT_CPUMAP,
    C_XDP_RX_HASH,
    C_XDP_FLOW_HASH,
    C_CPUMAP_ENQUEUE_FULL,
    C_CPUMAP_KTHREAD,
    C_SKB_BUILD,
    C_SW_HASH,
    C_XSK_ZC,
    C_XSK_COPY,
) = range(len(STAGES))
# per-packet CPU work is jittered; latencies and fixed per-event overheads are not
JITTERED = ("driver_rx", "gro", "rps_enqueue", "stack_rx", "socket_enqueue", "recvmsg",
            "xdp_prog", "xdp_drop", "xdp_tx", "xdp_redirect_cpumap", "cpumap_kthread",
            "skb_build", "xsk_zc", "xsk_copy")

# --- drop reasons: one drop path, names after SKB_DROP_REASON_* where one exists ----
DROP_REASONS = (
    "ring_full",  # NIC rx ring had no free descriptor (rx_missed / rx_no_buffer)
    "nic_overrun",  # NIC packet-rate ceiling exceeded (rx_fifo_errors)
    "backlog",  # enqueue_to_backlog: qlen > netdev_max_backlog (CPU_BACKLOG)
    "flow_limit",  # skb_flow_limit said drop (counted as CPU_BACKLOG by the kernel)
    "socket_rcvbuf",  # socket receive buffer full (SOCKET_RCVBUFF)
    "no_socket",  # no listener: UdpNoPorts / TCP reset (NO_SOCKET)
    "xdp_drop",  # the XDP program returned XDP_DROP (SKB_DROP_REASON has none: no skb)
    "xdp_aborted",  # XDP_ABORTED, or a cpumap redirect whose key has no entry (fallback 0)
    "cpumap_full",  # bq_flush_to_queue: the entry's ptr_ring slot was not empty
    "xsk_rx_ring_full",  # AF_XDP RX ring full (XDP_STATISTICS rx_ring_full)
    "xsk_fill_empty",  # no UMEM frame on the FILL ring (rx_fill_ring_empty_descs)
)
N_DROP_SLOTS = 16  # room for later mechanisms (XDP, cpumap, AF_XDP)
(
    DROP_RING_FULL,
    DROP_NIC_OVERRUN,
    DROP_BACKLOG,
    DROP_FLOW_LIMIT,
    DROP_SOCKET_RCVBUF,
    DROP_NO_SOCKET,
    DROP_XDP_DROP,
    DROP_XDP_ABORTED,
    DROP_CPUMAP_FULL,
    DROP_XSK_RX_FULL,
    DROP_XSK_FILL_EMPTY,
) = range(len(DROP_REASONS))

# --- global counters (Stats.cnt) ----------------------------------------------------
CNT_OFFERED = 0  # packets that reached the NIC
CNT_DELIVERED = 1  # read by an application thread
CNT_SOCKET_IN = 2  # queued on a socket
CNT_REORDERED = 3  # arrived at the socket behind a later packet of the same flow
CNT_LAT_SOCK_N = 4
CNT_LAT_APP_N = 5
CNT_GOOD_QUEUE = 6  # arrived on the rx queue whose IRQ CPU runs the flow's consumer
CNT_BAD_QUEUE = 7  # arrived elsewhere (flows that have a consumer only)
CNT_FORWARDED = 8  # sent back out by XDP_TX: a packet's third way out (not dropped)
CNT_XDP_PASS = 9  # XDP program verdicts (ethtool -S rx_queue_N_xdp_* style totals)
CNT_XDP_REDIRECT = 10
CNT_XDP_RUNS = 11
CNT_DROP0 = 12  # CNT_DROP0 + reason
N_CNT = CNT_DROP0 + N_DROP_SLOTS

# --- CPU time categories (Stats.cpu_ns, Stats.ts_cpu) -------------------------------
CPU_CATS = ("softirq", "ksoftirqd", "hardirq", "system", "user")
T_SOFTIRQ, T_KSOFTIRQD, T_HARDIRQ, T_SYSTEM, T_USER = range(5)

# --- per-interval packet series (Stats.ts_pkt) --------------------------------------
TS_PKT = ("offered", "delivered", "dropped", "processed")
TS_OFFERED, TS_DELIVERED, TS_DROPPED, TS_PROCESSED = range(4)

# --- latency histogram: log-linear, 64 sub-buckets per power of two (~1.6 %) --------
HIST_BINS = 128 + 64 * 40

# --- thread states --------------------------------------------------------------------
TH_SLEEP, TH_WAKING, TH_RUNNABLE = 0, 1, 2

# --- CPU segment kinds ----------------------------------------------------------------
SEG_NONE, SEG_NAPI, SEG_APP, SEG_CPUMAP = 0, 1, 2, 3

U32 = 0xFFFFFFFF


def struct(*fields) -> np.dtype:
    """A numpy structured dtype from ``(name, type)`` pairs: one record per entry, the
    fields of an entry side by side as in the kernel's struct. Compiled code reads and
    writes ``table[i].name``; Python reads a field over all entries as ``table["name"]``
    (a view)."""
    return np.dtype(list(fields), align=True)  # aligned: numba emits natural-width access


# Row groups: per-flow, per-socket, per-thread, per-queue and per-entry scalars are rows
# of one int64 array each (numba passes every array as ~8 flattened values; one array
# per group instead of one per field keeps the compiled loop smaller and faster).
# Compiled code reads ``p.cpu_i[PC_CM_ENTRY, c]``; Python reads ``p.cm_entry`` (the
# row, a writable view; boolean fields are read as a boolean copy).
#
# Record groups (RECORD_GROUPS) are stored the other way round, one record per entry
# (``p.queue_i[q, PQ_IRQ_CPU]``, ``ar.entry[e, AE_E_FLOW]``), as the kernel's own
# structs are (struct softnet_data, struct sock, struct rps_dev_flow): the fields of one
# entry that a mechanism reads together then share a cache line or two instead of each
# costing a miss in its own row. These are the tables indexed at random by CPU, queue,
# flow, socket, thread or table slot (docs/performance.md).

PQ_FIELDS = (  # fields of Params.queue_i records
    "irq_cpu",  # int64[nq]
    "rps_len",  # int64[nq]
    "xsk_of_queue",  # int64[nq]: XSKMAP[rx_queue_index]: socket, or -1
)
(PQ_IRQ_CPU, PQ_RPS_LEN, PQ_XSK_OF_QUEUE) = range(3)

PC_FIELDS = (  # rows of Params.cpu_i
    "cpu_rmap",  # int64[ncpu]: rx queue whose IRQ is on that CPU, or -1
    "cm_entry",  # int64[ncpu]: cpumap entry whose key is that CPU, or -1
)
(PC_CPU_RMAP, PC_CM_ENTRY) = range(2)

PE_FIELDS = (  # rows of Params.cm_i
    "cm_cpu",  # int64[E]
    "cm_qsize",  # int64[E]: ptr_ring size
    "cm_batch",  # int64[E]: ptr_ring consumer zeroing batch (16, or 1)
)
(PE_CM_CPU, PE_CM_QSIZE, PE_CM_BATCH) = range(3)


AE_FIELDS = (  # fields of ArfsState.entry records
    "e_flow",  # int64[cap]: flow whose 5-tuple the entry holds
    "e_flow_id",  # int64[cap]
    "e_fltr_id",  # int64[cap]
    "e_q",  # int64[cap]
    "e_state",  # int64[cap]: ARFS_FREE / INACTIVE / ACTIVE
    "e_next",  # int64[cap]: bucket chain
    "e_time",  # int64[cap]: time activated (UDP expiry)
    "free",  # int64[cap]: free entry stack
    "pend",  # int64[cap]: entries waiting to be written to hardware
    "e_pend",  # int8[cap]: entry is on the pending list
)
(
    AE_E_FLOW, AE_E_FLOW_ID, AE_E_FLTR_ID, AE_E_Q, AE_E_STATE, AE_E_NEXT, AE_E_TIME,
    AE_FREE, AE_PEND, AE_E_PEND
) = range(10)

AG_FIELDS = (  # rows of ArfsState.glob
    "free_n",  # int64[1]
    "last_fltr_id",  # int64[1]
    "hw_count",  # int64[1]
    "pend_n",  # int64[1]
)
(AG_FREE_N, AG_LAST_FLTR_ID, AG_HW_COUNT, AG_PEND_N) = range(4)

CE_FIELDS = (  # rows of CpumapState.entry
    "prod",  # int64[E]
    "cons",  # int64[E]
    "clear",  # int64[E]
    "kt_state",  # int8[E]: TH_SLEEP / TH_WAKING / TH_RUNNABLE
    "kt_vrt",  # int64[E]: kthread runtime (CFS share against other threads)
    "last_flush",  # int64[E]: time of the latest flush (its wake-up)
)
(CE_PROD, CE_CONS, CE_CLEAR, CE_KT_STATE, CE_KT_VRT, CE_LAST_FLUSH) = range(6)


# A queued packet's columns (FIFOs: consecutive packets of a queue share each column's
# cache lines), as planes of one int64 array and one int32 array per queue kind.
RG_FIELDS = (  # int64 planes of NicState.ring
    "ring_tarr",  # [nq, ring]: NIC arrival time
    "ring_seq",  # per-flow sequence number
    "ring_deq",  # time the driver took the descriptor
)
(RG_RING_TARR, RG_RING_SEQ, RG_RING_DEQ) = range(3)
RN_FIELDS = ("ring_flow", "ring_len")  # int32 planes of NicState.ring32
(RN_RING_FLOW, RN_RING_LEN) = range(2)

BL_FIELDS = (  # int64 planes of SoftnetData.bl, [ncpu, bl_cap]
    "bl_tarr",
    "bl_seq",
    "bl_stamp",  # time the enqueue happened
)
(BL_BL_TARR, BL_BL_SEQ, BL_BL_STAMP) = range(3)
BN_FIELDS = (  # int32 planes of SoftnetData.bl32
    "bl_flow",
    "bl_len",
    "bl_src",  # CPU that enqueued (for the cross-CPU cost)
)
(BN_BL_FLOW, BN_BL_LEN, BN_BL_SRC) = range(3)

NL_FIELDS = (  # planes of SoftnetData.lists
    "poll_list",  # int64[ncpu, L]: sd->poll_list
    "local_list",  # int64[ncpu, L]: the list net_rx_action took
    "repoll",  # int64[ncpu, L]
)
(NL_POLL_LIST, NL_LOCAL_LIST, NL_REPOLL) = range(3)

SQ_FIELDS = ("so_tarr", "so_seq", "so_stamp")  # int64 planes of SockState.sq, [total]
(SQ_SO_TARR, SQ_SO_SEQ, SQ_SO_STAMP) = range(3)
SN_FIELDS = ("so_flow", "so_len")  # int32 planes of SockState.sq32
(SN_SO_FLOW, SN_SO_LEN) = range(2)

BQ_FIELDS = ("bq_tarr", "bq_seq")  # int64 planes of CpumapState.bq, [ncpu, E, 8]
(BQ_BQ_TARR, BQ_BQ_SEQ) = range(2)
QN_FIELDS = ("bq_flow", "bq_len")  # int32 planes of CpumapState.bq32
(QN_BQ_FLOW, QN_BQ_LEN) = range(2)

CR_FIELDS = (  # int64 planes of CpumapState.ring, [E, Q]
    "r_tarr",
    "r_seq",
    "r_stamp",  # time the frame was produced
)
(CR_R_TARR, CR_R_SEQ, CR_R_STAMP) = range(3)
CN_FIELDS = ("r_flow", "r_len")  # int32 planes of CpumapState.ring32
(CN_R_FLOW, CN_R_LEN) = range(2)

RD_FIELDS = (  # fields of RfsState.dev records (struct rps_dev_flow)
    "dev_cpu",  # int64[nq, S] (RPS_NO_CPU)
    "dev_filter",  # int64[nq, S] (RPS_NO_FILTER)
    "dev_last_qtail",  # int64[nq, S] (u32)
    "dev_hash",  # int64[nq, S] (v6.18+)
)
(RD_DEV_CPU, RD_DEV_FILTER, RD_DEV_LAST_QTAIL, RD_DEV_HASH) = range(4)

# A flow as the receive path sees it (its hash, rx queue, socket, the XDP program's
# verdict), one record per flow, in the flow table's order.
FLOW = struct(
    ("flow_rxq", np.int64),  # rx queue by RSS
    ("flow_hash", np.int64),  # skb_get_hash() value (u32)
    ("flow_sock", np.int64),  # socket index or -1
    ("flow_tt", np.int64),  # mlx5 table (tcp4, udp4, tcp6, udp6)
    ("flow_sport", np.int64), ("flow_dport", np.int64),
    ("flow_udp", np.int64),  # 1 = UDP
    ("xdp_act", np.int64),  # XDP_* verdict of the rule the flow matches
    ("xdp_rule", np.int64),  # that rule, or -1 (default verdict)
    ("xdp_cpu", np.int64),  # static redirect key, or -1 = round robin
    ("flow_sw_hash", np.int64),  # software skb_get_hash() (no hw hash)
    ("flow_rss_hash", np.int64),  # the NIC's RSS hash (0 if rxhash is off)
)
# Per-flow sequence numbers: order of arrival at the NIC against order at the socket.
FLOW_SEQ = struct(
    ("flow_next_seq", np.int64),
    ("flow_max_seq", np.int64),  # highest sequence queued on a socket
    ("flow_delivered", np.int64),
)


class Params(NamedTuple):
    """Read-only configuration, already rounded the kernel's way."""

    ncpu: int
    nq: int
    nthreads: int
    ring_size: int
    napi_weight: int
    dev_rx_weight: int
    netdev_budget: int
    budget_jiffies: int
    max_softirq_jiffies: int
    jiffy_ns: int
    max_backlog: int
    bl_cap: int  # backlog storage per CPU, a power of two (> any queue it holds)
    bl_mask: int  # bl_cap - 1
    ring_mask: int  # rx ring storage (power of two >= ring_size) - 1
    rps_needed: bool
    netif_rx: bool  # device delivers with netif_rx() (no NAPI poll): veth, tun, legacy
    fl_history: int
    fl_log: int
    fl_hash32: bool
    ksoftirqd_defers: bool
    jitter_kind: int
    jitter_sigma: float
    interval_ns: int
    interval_inv: float  # 1 / interval_ns
    warmup_ns: int
    n_intervals: int
    cost_ns: np.ndarray  # float64[len(STAGES)]
    cost_i: np.ndarray  # int64[len(STAGES)]: cost_ns rounded to whole ns
    jitter_mask: np.ndarray  # bool[len(STAGES)]: stage is per-packet work
    irq_delay_ns: int  # irq_latency + rx_usecs
    queue_i: np.ndarray  # int64[nq, len(PQ_FIELDS)]: records PQ_*
    rps_map: np.ndarray  # int64[nq, ncpu]
    flow: np.ndarray  # FLOW[nflows]: compiled code reads p.flow[f].flow_hash
    sock_off: np.ndarray  # int64[nsock + 1]: storage of each socket queue
    # RFS / aRFS (reference sec. 4-5)
    rfs_on: bool  # rps_sock_flow_entries and some queue's rps_flow_cnt are set
    sock_flow_mask: int  # rps_sock_flow_entries (rounded) - 1
    rps_cpu_mask: int  # roundup_pow_of_two(nr_cpu_ids) - 1
    rfs_hash32: bool  # per-queue slot hash_32(hash, log) since v6.15 (else hash & mask)
    arfs_model: int  # 0 off, 1 ice-hash-match, 2 ice-tuple-match, 3 mlx5
    arfs_protect: bool  # v6.18: do not overwrite an active filter of another flow
    cpu_i: np.ndarray  # int64[len(PC_FIELDS), ncpu]: rows PC_*
    arfs_capacity: int  # hardware n-tuple filters
    arfs_delay_ns: int  # steer request -> service task / work item programs it
    arfs_period_ns: int  # ice service timer (expiry scan)
    # thread migration: explicit moves, or a random move every mig_every_ns
    mig_set: np.ndarray  # int64[nthreads, ncpu]: CPUs a random move may pick
    mig_t: np.ndarray  # int64[nthreads, K]: explicit move times
    mig_cpu: np.ndarray  # int64[nthreads, K]
    # XDP program (one per device, all rx queues) and cpumap entries (reference sec. 9)
    xdp_on: bool
    xdp_rr_cpus: np.ndarray  # int64[R, ncpu]: a round-robin rule's keys
    xdp_rr_n: np.ndarray  # int64[R]
    xdp_cost_extra: np.ndarray  # float64[R]: program work beyond xdp_prog (hash, meta)
    xdp_hash_meta: bool  # the program stores the RX hash as frame metadata (seed 004)
    cm_i: np.ndarray  # int64[len(PE_FIELDS), E]: rows PE_*
    cm_gro: bool  # v6.15+: the kthread hands skbs to GRO

# The driver's rx ring (ice ``struct ice_rx_ring``, mlx5 ``struct mlx5e_rq``) and its
# NAPI state, one record per rx queue. Descriptor positions are free-running counts.
RX_RING = struct(
    ("ring_tail", np.int64),  # descriptors filled
    ("ring_head", np.int64),  # descriptors taken by NAPI polls
    ("ring_rel", np.int64),  # descriptors returned to the NIC by time now
    ("napi_sched", np.int64),  # 1 = interrupt raised / NAPI scheduled
    ("q_packets", np.int64),
    ("q_drops", np.int64),
    ("q_polls", np.int64),
)


class NicState(NamedTuple):
    """Per rx queue descriptor rings and NAPI state (the driver's view).

    Compiled code reads queue q's fields as ``nic.queue[q].<field>``; Python reads a
    field of every queue as ``nic.queue["<field>"]``.
    """

    ring: np.ndarray  # int64[len(RG_FIELDS), nq, ring]: planes RG_*
    ring32: np.ndarray  # int32[len(RN_FIELDS), nq, ring]: planes RN_*
    queue: np.ndarray  # RX_RING[nq]


# ``struct softnet_data`` (include/linux/netdevice.h) and the CPU's scheduling state, one
# record per CPU. All int64 so far (the kernel's u32 queue positions are kept masked).
SOFTNET_DATA = struct(
    # backlog: one FIFO, [head, proc) = process_queue, [proc, tail) = input_pkt_queue
    ("bl_head", np.int64), ("bl_proc", np.int64), ("bl_tail", np.int64),
    ("bl_sched", np.int64),  # backlog NAPI_STATE_SCHED
    ("input_queue_head", np.int64), ("input_queue_tail", np.int64),  # u32 values
    # NAPI lists (napi id: rx queue q, or nq + cpu for the backlog): lengths, positions
    ("pl_n", np.int64), ("ll_pos", np.int64), ("ll_n", np.int64), ("rp_n", np.int64),
    ("ipi_n", np.int64),
    # net_rx_action / handle_softirqs state
    ("softirq_pending", np.int64), ("in_rx_action", np.int64), ("budget", np.int64),
    ("time_limit_j", np.int64),  # jiffies
    ("hs_active", np.int64),  # inside handle_softirqs (inline)
    ("hs_end_j", np.int64), ("hs_restart", np.int64),
    ("ksoftirqd", np.int64),  # softirq work deferred to ksoftirqd/<cpu>
    ("ks_vrt", np.int64),  # ksoftirqd runtime (CFS share against threads)
    ("app_vrt", np.int64),
    # the segment the CPU is running
    ("ev_pending", np.int64),  # a PRIO_CPU event is in the calendar
    ("seg_kind", np.int64),
    ("seg_arg", np.int64),  # napi id or thread
    ("seg_work", np.int64),
    ("seg_ctx", np.int64),  # T_SOFTIRQ or T_KSOFTIRQD for NAPI segments
    ("irq_debt", np.int64),  # hardirq time taken while a segment ran
    ("sys_debt", np.int64),  # kworker time (aRFS filter programming)
    ("rr", np.int64),  # round-robin position over the CPU's threads
    # flow limit (struct sd_flow_limit)
    ("fl_on", np.int64), ("fl_head", np.int64),
    # softnet_stat counters
    ("processed", np.int64), ("dropped", np.int64), ("time_squeeze", np.int64),
    ("received_rps", np.int64), ("flow_limit_count", np.int64),
)


class SoftnetData(NamedTuple):
    """Per-CPU ``struct softnet_data`` plus the CPU's scheduling state.

    Compiled code reads CPU c's fields as ``sd.cpu[c].<field>``; Python reads a field of
    every CPU as ``sd.cpu["<field>"]`` (a view: writes go through).
    """

    cpu: np.ndarray  # SOFTNET_DATA[ncpu]
    bl: np.ndarray  # int64[len(BL_FIELDS), ncpu, bl_cap]: planes BL_*
    bl32: np.ndarray  # int32[len(BN_FIELDS), ncpu, bl_cap]: planes BN_*
    lists: np.ndarray  # int64[len(NL_FIELDS), ncpu, L]: planes NL_*
    rps_ipi_list: np.ndarray  # int64[ncpu, ncpu]: targets to IPI at net_rx_action end
    fl_history: np.ndarray  # int64[ncpu, history]
    fl_buckets: np.ndarray  # int64[ncpu, table_len]


# A socket's receive queue (``struct sock``: sk_rcvbuf, sk_rmem_alloc, the queue) and the
# application thread that reads it, one record per socket: socket i is read by thread i.
SOCK = struct(
    ("sock_thread", np.int64),  # the thread that reads it (= its index)
    ("sock_rcvbuf", np.int64),  # sk_rcvbuf, bytes
    ("sock_cap", np.int64),  # packets the queue may hold
    ("sock_mask", np.int64),  # its storage (a power of two >= cap) - 1
    ("sock_record", np.int64),  # connected/TCP: recvmsg records the flow (RFS)
    ("sock_xsk_copy", np.int64),  # AF_XDP socket bound in copy mode
    ("sock_fill_bound", np.int64),  # its FILL ring / UMEM, not RX, is smaller
    ("so_head", np.int64), ("so_tail", np.int64),  # queue positions (free-running)
    ("so_rmem", np.int64),  # sk_rmem_alloc (truesize bytes)
    ("so_drops", np.int64),
    ("thread_sock", np.int64),  # the socket the thread reads (= its index)
    ("thread_batch", np.int64),  # packets per read
    ("thread_user_ns", np.float64), ("thread_sys_ns", np.float64),  # mean work per packet
    ("mig_every_ns", np.int64),  # 0 = never
    ("mig_set_n", np.int64), ("mig_n", np.int64),
    ("th_state", np.int64),  # TH_SLEEP / TH_WAKING / TH_RUNNABLE
    ("th_served", np.int64),
    ("thread_cpu", np.int64),  # where the thread runs now
    ("th_mig_k", np.int64),  # next explicit move
    ("th_migrations", np.int64),
)


class SockState(NamedTuple):
    """Socket receive queues (flattened, per-socket slots) and application threads."""

    sq: np.ndarray  # int64[len(SQ_FIELDS), total]: planes SQ_*
    sq32: np.ndarray  # int32[len(SN_FIELDS), total]: planes SN_*
    sock: np.ndarray  # SOCK[nsock]: compiled code reads so.sock[sk].so_tail
    flow: np.ndarray  # FLOW_SEQ[nflows]
    cpu_threads: np.ndarray  # int64[ncpu, nthreads]: threads on each CPU
    cpu_nthreads: np.ndarray  # int64[ncpu]


class Stats(NamedTuple):
    cnt: np.ndarray  # int64[N_CNT]
    lat_sock: np.ndarray  # int64[HIST_BINS]
    lat_app: np.ndarray  # int64[HIST_BINS]
    lat_sum: np.ndarray  # float64[2]: exact sums (socket, app) for the mean
    cpu_ns: np.ndarray  # int64[ncpu, 5]
    ts_cpu: np.ndarray  # int64[n_intervals, ncpu, 5]
    ts_pkt: np.ndarray  # int64[n_intervals, 4]
    ts_drop: np.ndarray  # int64[n_intervals, N_DROP_SLOTS]
    rng: np.ndarray  # uint64[1]
    icache: np.ndarray  # int64[3]: the last interval_of() result and its [lo, hi) in ns


class RfsState(NamedTuple):
    """rps_sock_flow_table and the per-queue rps_dev_flow tables (reference sec. 4)."""

    sock_flow: np.ndarray  # int64[entries] u32 values, RPS_NO_CPU when empty
    dev: np.ndarray  # int64[nq, S, len(RD_FIELDS)]: records RD_*
    dev_log: np.ndarray  # int64[nq]: log2 of the table size; 0 = no table
    out: np.ndarray  # int64[2]: the rflow get_rps_cpu chose (queue, slot) or -1
    cnt: np.ndarray  # int64[N_RFS_CNT]


RFS_CNT = ("rfs_steered", "rfs_moves", "rfs_held", "arfs_calls")
N_RFS_CNT = 8
RFS_STEERED, RFS_MOVES, RFS_HELD, RFS_ARFS_CALLS = range(4)


class ArfsState(NamedTuple):
    """The driver's aRFS filter list (ice ``arfs_fltr_list`` / mlx5 rule tables)."""

    entry: np.ndarray  # int64[cap, len(AE_FIELDS)]: records AE_*
    bucket: np.ndarray  # int64[NB]: first entry or -1
    glob: np.ndarray  # int64[len(AG_FIELDS), 1]: rows AG_*
    fdir_queue: np.ndarray  # int64[nflows]: queue of the flow's programmed filter, -1
    svc: np.ndarray  # int64[2]: [service task pending, timer armed]
    cnt: np.ndarray  # int64[N_ARFS_CNT]


class CpumapState(NamedTuple):
    """cpumap entries: per-source-CPU bulk queues, ptr_rings, kthreads (reference 9.2-9.3).

    Ring positions are free-running: ``prod`` frames produced, ``cons`` consumed and
    ``clear`` zeroed by the consumer; a slot is free iff ``prod - clear < qsize``.
    """

    bq_n: np.ndarray  # int64[ncpu, E]: frames in that CPU's bulk queue for the entry
    bq: np.ndarray  # int64[len(BQ_FIELDS), ncpu, E, 8]: planes BQ_*
    bq32: np.ndarray  # int32[len(QN_FIELDS), ncpu, E, 8]: planes QN_*
    flush_n: np.ndarray  # int64[ncpu]: entries on the CPU's flush list
    flush_list: np.ndarray  # int64[ncpu, E]
    ring: np.ndarray  # int64[len(CR_FIELDS), E, Q]: planes CR_*
    ring32: np.ndarray  # int32[len(CN_FIELDS), E, Q]: planes CN_*
    entry: np.ndarray  # int64[len(CE_FIELDS), entries]: rows CE_*
    rr: np.ndarray  # int64[ncpu, R]: per-CPU round-robin position (PERCPU_ARRAY)
    cnt: np.ndarray  # int64[E, N_CPUMAP_CNT]


CPUMAP_CNT = ("enqueued", "enqueue_drops", "flushes", "kthread_processed", "kthread_batches",
              "kthread_wakeups")
N_CPUMAP_CNT = 8
(CM_ENQUEUED, CM_DROPS, CM_FLUSHES, CM_PROCESSED, CM_BATCHES, CM_WAKEUPS) = range(6)
CPU_MAP_BULK_SIZE = 8  # kernel/bpf/cpumap.c
CPUMAP_BATCH = 8  # frames the kthread consumes per loop
XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)  # enum xdp_action
XDP_REDIRECT_XSK = 5  # rxlab's code for XDP_REDIRECT into an XSKMAP (not a kernel value)


ARFS_CNT = ("arfs_add", "arfs_update", "arfs_skip", "arfs_expire", "arfs_avoided",
            "arfs_hw_full", "arfs_programmed", "arfs_no_memory")
N_ARFS_CNT = 8
(ARFS_ADD, ARFS_UPDATE, ARFS_SKIP, ARFS_EXPIRE, ARFS_AVOIDED, ARFS_HW_FULL,
 ARFS_PROGRAMMED, ARFS_NO_MEMORY) = range(8)
ARFS_FREE, ARFS_INACTIVE, ARFS_ACTIVE = -1, 0, 1
ARFS_MODELS = ("off", "ice-hash-match", "ice-tuple-match", "mlx5")


# --- row groups: Python names for the rows, and construction by field name -----------
ROW_GROUPS = {  # a group's fields share a shape: rows of a 2-D array, planes of a 3-D one
    Params: {"queue_i": PQ_FIELDS, "cpu_i": PC_FIELDS, "cm_i": PE_FIELDS},
    NicState: {"ring": RG_FIELDS, "ring32": RN_FIELDS},
    SoftnetData: {"bl": BL_FIELDS, "bl32": BN_FIELDS, "lists": NL_FIELDS},
    SockState: {"sq": SQ_FIELDS, "sq32": SN_FIELDS},
    RfsState: {"dev": RD_FIELDS},
    ArfsState: {"entry": AE_FIELDS, "glob": AG_FIELDS},
    CpumapState: {"bq": BQ_FIELDS, "bq32": QN_FIELDS, "ring": CR_FIELDS, "ring32": CN_FIELDS,
                  "entry": CE_FIELDS},
}
INT32_GROUPS = {"ring32", "bl32", "sq32", "bq32"}  # the rest are int64
BOOL_ROWS: set[str] = set()  # fields read from Python as a boolean copy
RECORD_GROUPS = {  # field index last: one record per entry (see above)
    Params: {"queue_i"},
    RfsState: {"dev"},
    ArfsState: {"entry"},
}


def _field(attr: str, i: int, as_bool: bool, record: bool) -> property:
    idx = (..., i) if record else i
    if as_bool:  # a boolean copy, so that Python masks keep working
        return property(lambda self: getattr(self, attr)[idx] != 0)
    return property(lambda self: getattr(self, attr)[idx])  # a view: writes go through


for _cls, _groups in ROW_GROUPS.items():
    for _attr, _names in _groups.items():
        _rec = _attr in RECORD_GROUPS.get(_cls, ())
        for _i, _name in enumerate(_names):
            setattr(_cls, _name, _field(_attr, _i, _name in BOOL_ROWS, _rec))


def make(cls, **fields):
    """``cls(**fields)`` where each group's fields are given one by one, by name: they
    are stacked into the group's array (as rows, or as records for RECORD_GROUPS),
    int64 or int32 (equal shapes required). A group may also be given whole, as its
    array (``SoftnetData.cpu``: zeros of ``SOFTNET_DATA``, one record per CPU)."""
    for attr, names in ROW_GROUPS.get(cls, {}).items():
        if attr in fields:
            continue
        dtype = np.int32 if attr in INT32_GROUPS else np.int64
        axis = -1 if attr in RECORD_GROUPS.get(cls, ()) else 0
        fields[attr] = np.stack([np.asarray(fields.pop(name)).astype(dtype) for name in names],
                                axis=axis)
    return cls(**fields)
