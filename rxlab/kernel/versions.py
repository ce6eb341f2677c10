"""Kernel-version behaviour switches (each flag names the kernel change behind it).

Each behaviour that changed across versions is one flag here, computed once from the
scenario's ``host.kernel`` string; jitted code branches on the flag, never on versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rxlab.errors import UsageError


def parse_version(text: str) -> tuple[int, int]:
    """'6.19', '6.18.19' or '5.4.0-rc1' -> (major, minor)."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?(?:[-+.~][\w.+~-]*)?\s*", str(text))
    if not m:
        raise UsageError(f"host.kernel: {text!r} is not a kernel version; use e.g. \"6.19\"")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class KernelBehaviour:
    version: tuple[int, int]
    # "net: flow_limit: use hash_32()" (v6.16 cycle): bucket = hash_32(hash, log)
    flow_limit_hash_32: bool
    # "softirq: Let ksoftirqd do its job" (v4.9) .. its revert d15121be7485 (v6.5): while
    # ksoftirqd is pending, irq exit does not run softirqs inline.
    ksoftirqd_defers: bool
    # v6.10: input_queue_head advanced once per process_backlog call, not per packet
    backlog_head_batched: bool
    # softnet_stat column count: 11 (v3.11), 13 (v5.10), 15 (v6.4)
    softnet_columns: int
    # "net/flow_dissector: switch to siphash" (v5.4); older kernels use jhash2 (not modelled)
    siphash_flow_hash: bool
    # "net: extract napi poll functionality to __napi_poll()" .. "net: add sysfs attribute to
    # control napi threaded mode" (29863d41bb6e, v5.12): /sys/class/net/DEV/threaded
    napi_threaded: bool
    # "net: Allow to use SMP threads for backlog NAPI." (dad6b9770263, v6.10): boot
    # parameter thread_backlog_napi (always on with PREEMPT_RT)
    backlog_threads: bool
    # "sched/fair: Implement an EEVDF-like scheduling policy" (147f3efaa241, v6.6): before,
    # CFS (sleeper credit, wake-up granularity, sched_slice at the tick)
    sched_eevdf: bool
    # "sched: Reduce the default slice to avoid tasks getting an extra tick" (2ae891b82695,
    # v6.15; stable 6.6.y and 6.12.y took it later): base slice 0.70 ms, was 0.75 ms
    sched_slice_070: bool
    # "net: rfs: hash function change" (f3483c8e1da6, v6.15): an rps_dev_flow table's slot is
    # hash_32(hash, log) (before: hash & mask) and a flow ages out after 10 << log enqueues
    rfs_hash32: bool
    # "net: Prevent RPS table overwrite of active flows" (97bcc5b6f454) and "net: Cache hash
    # and flow_id to avoid recalculation" (48aa30443e52), v6.18: rps_dev_flow gains a u32
    # hash (12 bytes with CONFIG_RFS_ACCEL, was 8) and set_rps_cpu protects active slots
    rps_dev_flow_hash: bool
    # store_rps_dev_flow_table_cnt() (net/core/net-sysfs.c): the table mask fits a u32 up to
    # 6.19; from 7.1 (dd378109d20f, tagged table pointers) at most 2**27 entries
    rps_flow_cnt_limit: int
    # "bpf: cpumap: switch to GRO from netif_receive_skb_list()" (4f8ab26a034f, v6.15)
    cpumap_gro: bool
    # "tcp: Reduce chance of collisions in inet6_hashfn()" (v6.5): __ipv6_addr_jhash hashes
    # all four words of the address, and udp6_ehashfn keys with udp6_ehash_secret
    inet6_hash_whole: bool
    # "net: gro: add a per device gro flush timer" (3b47d30396ba, v3.19):
    # /sys/class/net/DEV/gro_flush_timeout, the NAPI's hrtimer and napi_watchdog
    gro_flush_timeout: bool
    # "net: napi: add hard irqs deferral feature" (6f8b12d661d0, v5.8):
    # /sys/class/net/DEV/napi_defer_hard_irqs, napi_complete_done's defer_hard_irqs_count
    napi_defer_hard_irqs: bool
    # "netdev-genl: Support setting per-NAPI config values" (Joe Damato, v6.13): both set
    # per NAPI over netdev netlink (napi-set); a sysfs write still sets every NAPI
    napi_config_per_queue: bool
    # "net: busy-poll: allow preemption in sk_busy_loop()" (217f69743681, v4.10): a socket's
    # busy poll takes the NAPI (NAPI_STATE_IN_BUSY_POLL | SCHED), polls it with
    # BUSY_POLL_BUDGET in the caller's context and gives it back with busy_poll_stop;
    # net.core.busy_read and SO_BUSY_POLL are older (3.11) but polled through the driver's
    # ndo_busy_poll before it (not modelled)
    busy_poll: bool
    # "net: Introduce preferred busy-polling" (7fd3253a7de6, v5.11): SO_PREFER_BUSY_POLL
    # (__napi_poll completes a full-budget softirq poll early) and SO_BUSY_POLL_BUDGET
    prefer_busy_poll: bool


def behaviour(text: str) -> KernelBehaviour:
    v = parse_version(text)
    if v < (3, 0):
        raise UsageError(f"host.kernel: {text!r} is older than rxlab models; use 3.11 or newer")
    cols = 15 if v >= (6, 4) else 13 if v >= (5, 10) else 11 if v >= (3, 11) else 10
    return KernelBehaviour(
        version=v,
        flow_limit_hash_32=v >= (6, 16),
        ksoftirqd_defers=(4, 9) <= v < (6, 5),
        backlog_head_batched=v >= (6, 10),
        softnet_columns=cols,
        siphash_flow_hash=v >= (5, 4),
        napi_threaded=v >= (5, 12),
        backlog_threads=v >= (6, 10),
        sched_eevdf=v >= (6, 6),
        sched_slice_070=v >= (6, 15),
        rfs_hash32=v >= (6, 15),
        rps_dev_flow_hash=v >= (6, 18),
        rps_flow_cnt_limit=1 << 27 if v >= (7, 1) else 1 << 32,
        cpumap_gro=v >= (6, 15),
        inet6_hash_whole=v >= (6, 5),
        gro_flush_timeout=v >= (3, 19),
        napi_defer_hard_irqs=v >= (5, 8),
        napi_config_per_queue=v >= (6, 13),
        busy_poll=v >= (4, 10),
        prefer_busy_poll=v >= (5, 11),
    )
