"""Simulation state as arrays, grouped in NamedTuples named after kernel structures.

Python allocates (``rxlab.build``); jitted mechanisms mutate in place (stumpy's
``stumpi`` pattern). Each kernel struct the model keeps is one array of a numpy
structured dtype, one record per entry (``SOFTNET_DATA`` per CPU, ``RX_RING`` per rx
queue, ``SOCK`` per socket, ``APP_THREAD`` per application thread, ``RPS_DEV_FLOW`` per
queue and slot, ``ARFS_ENTRY``, ``CPUMAP_ENTRY``, ``FLOW``, ``SKB``): compiled code reads
``sd.cpu[c].input_queue_head``, Python reads a field of every entry as
``sd.cpu["input_queue_head"]`` (a view). Queue positions are free-running counters as
in the kernel (``input_queue_head``/``tail`` are u32 and compared with ``s32_diff``);
queues are rings indexed ``position & mask`` over storage rounded up to a power of two
(an integer division per access was ~1/3 of the per-packet time); the logical capacity
(ring size, socket queue) is kept apart.

A packet in flight is an ``SKB`` record in the queue that holds it (rx ring, backlog,
socket queue, cpumap bulk queue, ptr_ring), copied from queue to queue: one record type
for every queue, and a packet can stay queued across traffic chunks. (A slab of skb
records with queues of ids was measured slower on two of the three benchmark scenarios;
docs/performance.md.)

The values the state holds are named in modules of their own: cost stages
(``rxlab.kernel.stages``), drop reasons (``drop_reasons``), counters and CPU time
categories (``counters``), thread, segment and work-item states (``sched_states``).
"""

from typing import NamedTuple

import numpy as np

U32 = 0xFFFFFFFF


def struct(*fields) -> np.dtype:
    """A numpy structured dtype from ``(name, type)`` pairs: one record per entry, the
    fields of an entry side by side as in the kernel's struct. Compiled code reads and
    writes ``table[i].name``; Python reads a field over all entries as ``table["name"]``
    (a view)."""
    return np.dtype(list(fields), align=True)  # aligned: numba emits natural-width access


# One record per entry, the fields of an entry side by side as in the kernel's own
# structs (struct softnet_data, struct sock, struct rps_dev_flow): the fields a mechanism
# reads together share a cache line or two instead of each costing a miss in its own
# array, and numba passes one array per table (every array argument is ~8 flattened
# values, so fewer arrays keep the compiled loop smaller). Compiled code reads
# ``p.queue[q].irq_cpu``; Python reads a field of every entry as ``p.queue["irq_cpu"]``
# (a view: writes go through). Values the kernel keeps as u16/u32 are int64 here: a
# narrower field would give every function it is passed to a second compiled signature,
# and u32 positions are masked with U32 where the kernel wraps them.

# Per rx queue configuration (netdev_rx_queue: rps_map length, the IRQ's CPU, XSKMAP).
QUEUE_PARAMS = struct(
    ("irq_cpu", np.int64),  # CPU the queue's interrupt is affine to
    ("rps_len", np.int64),  # rps_map->len
    ("xsk_of_queue", np.int64),  # XSKMAP[rx_queue_index]: socket, or -1
    ("napi_cpu", np.int64),  # CPU of the queue's NAPI kthread napi/DEV-ID (threaded)
    ("defer_hard_irqs", np.int64),  # napi_defer_hard_irqs of the queue's NAPI
    ("gro_flush_ns", np.int64),  # gro_flush_timeout of the queue's NAPI, ns
)
# Per CPU configuration.
CPU_PARAMS = struct(
    ("cpu_rmap", np.int64),  # rx queue whose IRQ is on that CPU (cpu_rmap), or -1
    ("cm_entry", np.int64),  # cpumap entry whose key is that CPU, or -1
)
# Per cpumap entry configuration (struct bpf_cpu_map_entry as created).
CPUMAP_PARAMS = struct(
    ("cpu", np.int64),  # the entry's key: the kthread's CPU
    ("qsize", np.int64),  # ptr_ring size
    ("batch", np.int64),  # ptr_ring consumer zeroing batch (16, or 1)
)

# A packet in a queue (struct sk_buff, or an xdp_frame before the cpumap kthread builds
# one): the fields the model carries with it. Every FIFO (rx ring, backlog, socket
# queue, cpumap bulk queue and ptr_ring) is a ring of these records.
SKB = struct(
    ("tarr", np.int64),  # wire arrival time (last bit in): every latency starts here
    ("seq", np.int64),  # per-flow sequence number
    ("stamp", np.int64),  # time of the hand-off into this queue (rx ring: written by
    # the NIC while queued, then the time the driver gave the descriptor back; backlog,
    # socket, ptr_ring: enqueued)
    ("flow", np.int32),
    ("len", np.int32),
    ("src", np.int32),  # CPU that enqueued it (backlog: the cross-CPU cost)
)

# ``struct rps_dev_flow`` (include/net/rps.h), [nq, rps_flow_cnt] per queue.
RPS_DEV_FLOW = struct(
    ("cpu", np.int64),  # u16 in the kernel, RPS_NO_CPU when unset
    ("filter", np.int64),  # u16, RPS_NO_FILTER
    ("last_qtail", np.int64),  # u32
    ("hash", np.int64),  # u32 (v6.18+)
)

# The driver's aRFS filter entry (ice ``struct ice_arfs_entry``, mlx5 ``struct
# arfs_rule``), one record per entry slot.
ARFS_ENTRY = struct(
    ("flow", np.int64),  # flow whose 5-tuple the entry holds
    ("flow_id", np.int64),
    ("fltr_id", np.int64),
    ("q", np.int64),  # rx queue the filter steers to
    ("state", np.int64),  # ARFS_FREE / INACTIVE / ACTIVE
    ("next", np.int64),  # bucket chain, -1 at the end
    ("time", np.int64),  # time activated (UDP expiry)
    ("pend", np.int64),  # on the pending list
)
# The driver's aRFS globals, one record.
ARFS_GLOB = struct(
    ("free_n", np.int64),  # entries on the free stack
    ("last_fltr_id", np.int64),
    ("hw_count", np.int64),  # filters written to hardware
    ("pend_n", np.int64),  # entries on the pending list
    ("svc_pending", np.int64),  # the service task / work item: SVC_IDLE, SVC_QUEUED
    # (queue_work done, its kworker not yet woken) or SVC_RUNNABLE (woken or running)
    ("svc_cpu", np.int64),  # CPU of the kworker that runs it
    ("svc_run", np.int64),  # 1 = a run has started (its snapshot is taken)
    ("svc_n0", np.int64),  # entries of the pending list the run took at its start
    ("svc_pos", np.int64),  # of which written so far
    ("svc_debt", np.int64),  # ns of expiry-scan work the run still has to do
    # arfs_lock (ice ``vsi->arfs_lock``, mlx5 ``arfs->arfs_lock``): its latest hold is
    # [lock_lo, lock_free); the lock is known free over [lock_prev, lock_lo)
    ("lock_free", np.int64),
    ("lock_lo", np.int64),
    ("lock_prev", np.int64),
)

# A cpumap entry's ptr_ring positions and its kthread (struct bpf_cpu_map_entry).
CPUMAP_ENTRY = struct(
    ("prod", np.int64),  # frames produced
    ("cons", np.int64),  # consumed
    ("clear", np.int64),  # zeroed by the consumer
    ("kt_state", np.int64),  # TH_SLEEP / TH_WAKING / TH_RUNNABLE
    ("kt_vrt", np.int64),  # kthread vruntime (rxlab.kernel.sched)
    ("kt_lag", np.int64),  # its lag when it last slept (EEVDF place_entity)
    ("last_flush", np.int64),  # time of the latest flush (its wake-up)
    ("flush_cpu", np.int64),  # the CPU of that flush (the kthread's waker)
    ("kt_ns", np.int64),  # the kthread's CPU time (system)
)

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
    napi_threaded: bool  # some queue's NAPI runs in its kthread (nic.threaded)
    napi_defer_on: bool  # some queue defers its IRQ (napi_defer_hard_irqs + gro_flush_timeout)
    busy_poll_on: bool  # some socket busy-polls (kernel.busy_read, apps[].busy_poll)
    backlog_threaded: bool  # kernel.thread_backlog_napi: remote backlogs in backlog_napi/N
    # the fair class (rxlab.kernel.sched), tunables scaled for the host's CPU count
    sched_eevdf: bool  # v6.6+: EEVDF; before: CFS
    sched_slice_ns: int  # EEVDF base slice; CFS sched_latency
    sched_min_gran_ns: int  # CFS sysctl_sched_min_granularity
    sched_wakeup_gran_ns: int  # CFS sysctl_sched_wakeup_granularity
    sched_lag_limit_ns: int  # EEVDF update_entity_lag: max(2 * slice, TICK_NSEC)
    jitter_kind: int
    jitter_sigma: float
    interval_ns: int
    interval_inv: float  # 1 / interval_ns
    warmup_ns: int
    n_intervals: int
    win_ns: int  # the traffic window [0, win_ns) the run's CPU shares cover
    cost_ns: np.ndarray  # float64[len(STAGES)]
    cost_i: np.ndarray  # int64[len(STAGES)]: cost_ns rounded to whole ns
    jitter_mask: np.ndarray  # bool[len(STAGES)]: stage is per-packet work
    irq_delay_ns: int  # irq_latency + rx_usecs
    nic_svc_ns: int  # 1 / nic.max_pps (0: no ceiling)
    # the driver's RX poll (rxlab/drivers.py; docs/model.md "Driver RX polls")
    poll_clean: bool  # re-read the next descriptor until the budget (else a count at start)
    refill_where: int  # REFILL_PER_PACKET / REFILL_IN_LOOP / REFILL_AFTER_LOOP
    refill_batch: int  # give buffers back once this many are consumed
    refill_keep: int  # descriptors the driver never gives the NIC (ring - 1 rule)
    refill_align: int  # the NIC sees the tail rounded down to a multiple of this
    queue: np.ndarray  # QUEUE_PARAMS[nq]
    rps_map: np.ndarray  # int64[nq, ncpu]
    flow: np.ndarray  # FLOW[nflows]: compiled code reads p.flow[f].flow_hash
    sock_off: np.ndarray  # int64[nsock + 1]: storage of each socket queue
    # RFS / aRFS (get_rps_cpu, set_rps_cpu in net/core/dev.c)
    rfs_on: bool  # rps_sock_flow_entries and some queue's rps_flow_cnt are set
    sock_flow_mask: int  # rps_sock_flow_entries (rounded) - 1
    rps_cpu_mask: int  # roundup_pow_of_two(nr_cpu_ids) - 1
    rfs_hash32: bool  # per-queue slot hash_32(hash, log) since v6.15 (else hash & mask)
    arfs_model: int  # ARFS_OFF, ARFS_ICE_HASH_MATCH, ARFS_ICE_TUPLE_MATCH, ARFS_MLX5
    arfs_protect: bool  # v6.18: do not overwrite an active filter of another flow
    cpu: np.ndarray  # CPU_PARAMS[ncpu]
    arfs_capacity: int  # hardware n-tuple filters
    arfs_delay_ns: int  # steer request -> service task / work item programs it
    arfs_period_ns: int  # ice service timer (expiry scan)
    # thread migration: explicit moves, or a random move every mig_every_ns
    mig_set: np.ndarray  # int64[nthreads, ncpu]: CPUs a random move may pick
    mig_t: np.ndarray  # int64[nthreads, K]: explicit move times
    mig_cpu: np.ndarray  # int64[nthreads, K]
    # XDP program (one per device, all rx queues) and cpumap entries (kernel/bpf/cpumap.c)
    xdp_on: bool
    xdp_rr_cpus: np.ndarray  # int64[R, ncpu]: a round-robin rule's keys
    xdp_rr_n: np.ndarray  # int64[R]
    xdp_cost_extra: np.ndarray  # float64[R]: program work beyond xdp_prog (hash, meta)
    xdp_hash_meta: bool  # the program stores the RX hash as frame metadata (seed 004)
    cpumap: np.ndarray  # CPUMAP_PARAMS[E]
    cm_gro: bool  # v6.15+: the kthread hands skbs to GRO

# The driver's rx ring (ice ``struct ice_rx_ring``, mlx5 ``struct mlx5e_rq``) and its
# NAPI state, one record per rx queue. Descriptor positions are free-running counts.
RX_RING = struct(
    ("ring_tail", np.int64),  # descriptors filled
    ("ring_head", np.int64),  # descriptors taken by NAPI polls
    ("ring_ret", np.int64),  # descriptors given back (refilled), each stamped with when
    ("ring_rel", np.int64),  # of those, given back by the time the NIC last looked
    ("ring_lim", np.int64),  # the NIC may fill positions below this (tail it saw)
    ("napi_sched", np.int64),  # 1 = interrupt raised / NAPI scheduled
    ("q_packets", np.int64),
    ("q_drops", np.int64),
    ("q_polls", np.int64),
    ("q_irqs", np.int64),  # device interrupts the queue raised (/proc/interrupts)
    ("q_timer_polls", np.int64),  # NAPI schedules by its hrtimer (napi_watchdog)
    ("q_empty_polls", np.int64),  # driver polls that found no packet
    ("defer_count", np.int64),  # napi->defer_hard_irqs_count
    ("timer_cpu", np.int64),  # CPU the NAPI's hrtimer was armed on (pinned)
    ("timer_at", np.int64),  # when the armed hrtimer expires (-1: not armed); an
    # hrtimer_start on an armed timer moves it, so an earlier expiry event is stale
    ("q_sched", np.int64),  # NAPI_STATE_SCHED: on a poll list, polled, or busy-polled
    # socket busy polling (rxlab.kernel.busy_poll)
    ("q_bp_owner", np.int64),  # NAPI_STATE_IN_BUSY_POLL: the thread polling it, or -1
    ("q_prefer", np.int64),  # NAPI_STATE_PREFER_BUSY_POLL
    ("q_bp_waiter", np.int64),  # a thread spinning until the NAPI is free, or -1
    ("q_bp_pkts", np.int64),  # packets busy polls took (LINUX_MIB_BUSYPOLLRXPACKETS)
)
# A NAPI's kthread (struct napi_struct's thread), one record per NAPI id: rx queue q's
# napi/DEV-ID (threaded NAPI), then CPU c's backlog_napi/c at nq + c (threaded backlog),
# apart from the ring's hot record.
NAPI_KTHREAD = struct(
    ("nt_state", np.int64),  # TH_SLEEP / TH_WAKING / TH_RUNNABLE
    ("nt_waker", np.int64),  # the CPU whose wake-up is on its way (TH_WAKING)
    ("nt_rewake", np.int64),  # backlog: a packet's enqueue wakes it again at this time (-1)
    ("nt_vrt", np.int64),  # vruntime (rxlab.kernel.sched)
    ("nt_lag", np.int64),  # its lag when it last slept (EEVDF place_entity)
    ("nt_ns", np.int64),  # CPU time of its own (system)
    ("nt_bh_ns", np.int64),  # softirq its local_bh_enable ran inline (its context)
)


class NicState(NamedTuple):
    """Per rx queue descriptor rings and NAPI state (the driver's view).

    Compiled code reads queue q's fields as ``nic.queue[q].<field>``; Python reads a
    field of every queue as ``nic.queue["<field>"]``.
    """

    ring: np.ndarray  # SKB[nq, ring storage]
    queue: np.ndarray  # RX_RING[nq]
    pause: np.ndarray  # POLL_PAUSE[1]: a driver poll waiting for the next chunk
    thread: np.ndarray  # NAPI_KTHREAD[nq + ncpu]: each NAPI's kthread (NAPI_KTHREAD)


REFILL_PER_PACKET, REFILL_IN_LOOP, REFILL_AFTER_LOOP = 0, 1, 2

# A driver poll that reached the end of the traffic chunk with its ring empty: whether
# the next descriptor is written by now depends on arrivals not generated yet, so the
# poll stops there and resumes first thing in the next chunk (rx_loop.dispatch), exactly
# where it was. ``phase`` 0: before the poll's first descriptor (count-at-start reads
# its count then); the rest is what dispatch does once the poll returns.
POLL_PAUSE = struct(
    ("on", np.int64), ("c", np.int64), ("q", np.int64), ("t", np.int64),
    ("work", np.int64), ("count", np.int64), ("phase", np.int64),
    ("t0", np.int64), ("ctx", np.int64), ("was_ks", np.int64),
    ("thread", np.int64),  # POLL_SOFTIRQ, POLL_KTHREAD or POLL_BUSY (sched_states)
    ("budget", np.int64),  # the poll's budget (the NAPI weight, or a busy poll's)
)


# Arrivals.pos slots: the arrival the loop (or a driver poll that keeps cleaning) ingests
# next, and whether this chunk is the last call's (no arrivals after it)
W_NEXT, W_LAST = 0, 1
# Stats.icache slots: the last interval_of() result and its [lo, hi) in ns
IC_INTERVAL, IC_LO, IC_HI = 0, 1, 2


class Arrivals(NamedTuple):
    """One chunk of shaped arrivals, with the position the loop (or a driver poll that
    keeps cleaning) has ingested up to: ``pos[W_NEXT]``; ``pos[W_LAST]`` = 1 on the last
    call."""

    t_wire: np.ndarray  # int64: last bit off the wire (latency origin)
    t_nic: np.ndarray  # int64: out of the NIC's FIFO, descriptor written
    flow: np.ndarray  # int32
    length: np.ndarray  # int32
    overrun: np.ndarray  # bool
    pos: np.ndarray  # int64[2]: W_NEXT, W_LAST


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
    ("time_limit_t", np.int64),  # ns: the jiffy at which net_rx_action stops begins
    ("hs_active", np.int64),  # inside handle_softirqs (inline)
    ("hs_end_t", np.int64), ("hs_restart", np.int64),  # ns, as time_limit_t
    ("ksoftirqd", np.int64),  # softirq work deferred to ksoftirqd/<cpu>
    # the ksoftirqd task is awake (woken, not yet asleep again): work run inline meanwhile
    # (an interrupt's exit, a local_bh_enable) does not put it to sleep, so handing the
    # work back does not place it again
    ("ks_running", np.int64),
    # a task's local_bh_enable runs the pending softirq inline, in its context (its
    # runtime pays): BH_APP (application thread bh_task's recv) or BH_NAPI_THREAD (queue
    # bh_task's NAPI kthread); BH_NONE: at irq exit, or in ksoftirqd
    ("bh_inline", np.int64), ("bh_task", np.int64),
    # the fair class (rxlab.kernel.sched): vruntimes, and the lags saved at sleep (EEVDF)
    ("ks_vrt", np.int64), ("ks_lag", np.int64),  # ksoftirqd/<cpu>
    ("app_vrt", np.int64), ("app_lag", np.int64),  # the CPU's application threads
    ("min_vrt", np.int64),  # cfs_rq->min_vruntime: where a waking task is placed from
    # the task holding the CPU (SCHED_*, SCHED_IDLE: none), the vruntime at which its
    # slice ends (EEVDF deadline, CFS sched_slice), the start of the jiffy after the
    # CPU's previous scheduling decision (a tick since: rxlab.kernel.sched slice_over),
    # and need_resched set by a wake-up
    ("cur_who", np.int64), ("cur_vend", np.int64), ("disp_jend", np.int64),
    ("resched", np.int64),
    # the segment the CPU is running
    ("ev_pending", np.int64),  # a PRIO_CPU event is in the calendar
    ("seg_kind", np.int64),
    ("seg_arg", np.int64),  # napi id or thread
    ("seg_work", np.int64),
    ("seg_ctx", np.int64),  # T_SOFTIRQ or T_KSOFTIRQD for NAPI segments
    ("seg_t0", np.int64),  # start of a thread's segment (a tick inside it: tick_irq_exit)
    ("irq_debt", np.int64),  # hardirq time taken while a segment ran
    ("kw_vrt", np.int64), ("kw_lag", np.int64),  # the CPU's kworker (as ks_vrt, ks_lag)
    ("kw_ns", np.int64),  # its CPU time (system)
    ("rr", np.int64),  # round-robin position over the CPU's threads
    # flow limit (struct sd_flow_limit)
    ("fl_on", np.int64), ("fl_head", np.int64),
    # softnet_stat counters
    ("processed", np.int64), ("dropped", np.int64), ("time_squeeze", np.int64),
    ("received_rps", np.int64), ("flow_limit_count", np.int64),
    # wake-ups of threads on other CPUs owed by the running segment (rxlab/kernel/wake.py)
    ("wake_debt", np.int64), ("wake_ctx", np.int64),
    ("bp_thread", np.int64),  # the thread whose socket busy poll holds the CPU, or -1
)


class SoftnetData(NamedTuple):
    """Per-CPU ``struct softnet_data`` plus the CPU's scheduling state.

    Compiled code reads CPU c's fields as ``sd.cpu[c].<field>``; Python reads a field of
    every CPU as ``sd.cpu["<field>"]`` (a view: writes go through).
    """

    cpu: np.ndarray  # SOFTNET_DATA[ncpu]
    bl: np.ndarray  # SKB[ncpu, bl_cap]: the backlog FIFO
    poll_list: np.ndarray  # int64[ncpu, L]: sd->poll_list (napi ids)
    local_list: np.ndarray  # int64[ncpu, L]: the list net_rx_action took
    repoll: np.ndarray  # int64[ncpu, L]
    rps_ipi_list: np.ndarray  # int64[ncpu, ncpu]: targets to IPI at net_rx_action end
    fl_history: np.ndarray  # int64[ncpu, history]
    fl_buckets: np.ndarray  # int64[ncpu, table_len]


# A socket's receive queue (``struct sock``: sk_rcvbuf, sk_rmem_alloc, the queue), one
# record per socket; socket i is read by application thread i (``APP_THREAD``).
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
    # TCP (connected, established): where the softirq's work on a packet runs
    ("sock_tcp", np.int64),  # 1 = a TCP socket (tcp_v4_rcv), 0 = UDP / AF_XDP
    ("tcp_local", np.int64),  # packets processed on the reader's CPU
    ("tcp_remote_n", np.int64),  # on another CPU, socket not owned
    ("tcp_backlog_n", np.int64),  # on another CPU, owned: to the socket backlog
    ("tcp_ofo_n", np.int64),  # out of order: ofo queue and an immediate (S)ACK
    # busy polling (include/net/busy_poll.h): sk_ll_usec (SO_BUSY_POLL, default
    # net.core.busy_read), sk_prefer_busy_poll, sk_busy_poll_budget (0: BUSY_POLL_BUDGET),
    # and the flows of the first and the latest packet read, whose rx queues give
    # sk_napi_id (rxlab.kernel.busy_poll.sk_napi_id; -1: none read yet)
    ("sock_ll_usec", np.int64), ("sock_bp_prefer", np.int64), ("sock_bp_budget", np.int64),
    ("so_first_flow", np.int64), ("so_last_flow", np.int64),
)
# An application thread (its ``task_struct`` as the model needs it), one record per
# thread: thread i reads socket i.
APP_THREAD = struct(
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
    # a TCP reader's latest read: its recvmsg part, where it holds the socket lock
    # (sock_owned_by_user) over [lo, hi)
    ("th_own_lo", np.int64), ("th_own_hi", np.int64),
    ("th_rel", np.int64),  # that read's end: release_sock runs the backlog
    ("th_bl_ns", np.int64),  # backlog work __release_sock owes (system ns)
    # wake-ups of the thread, those from another CPU, and the latest one's waker
    ("th_wakeups", np.int64), ("th_wakeups_remote", np.int64), ("th_waker", np.int64),
    # the thread's CPU time (/proc/PID/stat): its own (recvmsg, release_sock's backlog,
    # user work) and the softirq its recv's local_bh_enable ran inline
    ("th_ns", np.int64), ("th_bh_ns", np.int64),
    # its recv's busy loop (rxlab.kernel.busy_poll): BP_OFF / BP_LOOP / BP_STOP, when
    # sk_busy_loop_timeout ends it, the NAPI it holds (-1), packets its polls took, and
    # the CPU time of the loop (its polls and its spinning: system time)
    ("th_bp", np.int64), ("th_bp_end", np.int64), ("th_bp_napi", np.int64),
    ("th_bp_pkts", np.int64), ("th_bp_ns", np.int64),
    # its EV_BUSY_POLL events in the calendar (one of each at most): the timeout's time
    # (-1: none), and whether a kick is on its way
    ("th_bp_tev", np.int64), ("th_bp_kick", np.int64),
)


class SockState(NamedTuple):
    """Socket receive queues (flattened, per-socket slots) and application threads."""

    sq: np.ndarray  # SKB[total]: socket sk's queue at sock_off[sk]
    sock: np.ndarray  # SOCK[nsock]: compiled code reads so.sock[sk].so_tail
    thread: np.ndarray  # APP_THREAD[nthreads]: compiled code reads so.thread[th].th_state
    flow: np.ndarray  # FLOW_SEQ[nflows]
    cpu_threads: np.ndarray  # int64[ncpu, nthreads]: threads on each CPU
    cpu_nthreads: np.ndarray  # int64[ncpu]


class Stats(NamedTuple):
    cnt: np.ndarray  # int64[N_CNT]
    lat_sock: np.ndarray  # int64[HIST_BINS]
    lat_app: np.ndarray  # int64[HIST_BINS]
    lat_nic: np.ndarray  # int64[HIST_BINS]: wait in the NIC's FIFO (nic.max_pps)
    lat_sum: np.ndarray  # float64[3]: exact sums (socket, app, NIC wait) for the mean
    cpu_ns: np.ndarray  # int64[ncpu, 5]: every ns charged, past the run's end too
    win_cpu: np.ndarray  # int64[ncpu, 5]: ns charged inside the traffic window
    ts_cpu: np.ndarray  # int64[n_intervals, ncpu, 5]
    ts_pkt: np.ndarray  # int64[n_intervals, 4]
    ts_drop: np.ndarray  # int64[n_intervals, N_DROP_SLOTS]
    rng: np.ndarray  # uint64[1]
    icache: np.ndarray  # int64[3]: IC_INTERVAL, IC_LO, IC_HI
    prof: np.ndarray  # int64[len(profile.SITES), 2]: calls, cycles (RXLAB_PROFILE=1 only)


class RfsState(NamedTuple):
    """rps_sock_flow_table and the per-queue rps_dev_flow tables (include/net/rps.h,
    net/core/dev.c)."""

    sock_flow: np.ndarray  # int64[entries] u32 values, RPS_NO_CPU when empty
    dev: np.ndarray  # RPS_DEV_FLOW[nq, S]
    dev_log: np.ndarray  # int64[nq]: log2 of the table size; 0 = no table
    cnt: np.ndarray  # RFS_COUNTERS[1]




class ArfsState(NamedTuple):
    """The driver's aRFS filter list (ice ``arfs_fltr_list`` / mlx5 rule tables)."""

    entry: np.ndarray  # ARFS_ENTRY[cap]
    free: np.ndarray  # int64[cap]: free entry stack (glob.free_n deep)
    pend: np.ndarray  # int64[cap]: entries waiting to be written to hardware
    bucket: np.ndarray  # int64[NB]: first entry or -1
    glob: np.ndarray  # ARFS_GLOB[1]
    fdir_queue: np.ndarray  # int64[nflows]: queue of the flow's programmed filter, -1
    cnt: np.ndarray  # ARFS_COUNTERS[1]


class CpumapState(NamedTuple):
    """cpumap entries: per-source-CPU bulk queues, ptr_rings, kthreads (cpu_map_enqueue,
    bq_flush_to_queue, cpu_map_kthread_run in kernel/bpf/cpumap.c).

    Ring positions are free-running: ``prod`` frames produced, ``cons`` consumed and
    ``clear`` zeroed by the consumer; a slot is free iff ``prod - clear < qsize``.
    """

    bq_n: np.ndarray  # int64[ncpu, E]: frames in that CPU's bulk queue for the entry
    bq: np.ndarray  # SKB[ncpu, E, 8]: the bulk queues
    flush_n: np.ndarray  # int64[ncpu]: entries on the CPU's flush list
    flush_list: np.ndarray  # int64[ncpu, E]
    ring: np.ndarray  # SKB[E, Q]: the ptr_rings, stamp = time produced
    entry: np.ndarray  # CPUMAP_ENTRY[E]
    rr: np.ndarray  # int64[ncpu, R]: per-CPU round-robin position (PERCPU_ARRAY)
    cnt: np.ndarray  # CPUMAP_COUNTERS[E]


XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)  # enum xdp_action
XDP_REDIRECT_XSK = 5  # rxlab's code for XDP_REDIRECT into an XSKMAP (not a kernel value)


ARFS_FREE, ARFS_INACTIVE, ARFS_ACTIVE = -1, 0, 1
ARFS_MODELS = ("off", "ice-hash-match", "ice-tuple-match", "mlx5")
# Params.arfs_model: the index of the scenario's nic.arfs.model in ARFS_MODELS
ARFS_OFF, ARFS_ICE_HASH_MATCH, ARFS_ICE_TUPLE_MATCH, ARFS_MLX5 = range(len(ARFS_MODELS))
