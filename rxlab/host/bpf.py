"""BPF programs assembled here, loaded with the bpf() syscall: no clang needed.

* ``hash_setter`` (tc egress on the sender veth): looks the UDP source port up in a map
  and calls ``bpf_set_hash(skb, value)``, so the receiver's ``get_rps_cpu`` sees a hash
  the test chose (``bpf_set_hash`` also sets ``l4_hash``, so ``skb_get_hash()`` keeps it:
  net/core/filter.c, include/linux/skbuff.h).
* ``flow_recorder`` (tc ingress on the receiver veth): per (source port, CPU) the last
  ``skb->hash``, the number of hash changes and a packet count. tc ingress runs after
  RPS, on the CPU that processes the packet (``process_backlog``). Also usable at tc
  egress of the sender veth: what enters ``veth_xmit``.

Both parse Ethernet -> IPv4 (IHL 5) -> UDP with ``bpf_skb_load_bytes`` (no packet
pointer arithmetic for the verifier to check) and return ``TC_ACT_UNSPEC`` (-1): in
direct-action mode that hands the packet to the next filter (in ``prio`` order), and
the packet passes when none is left. (``TC_ACT_OK`` would end the walk: a recorder
attached after the setter, or in front of the u32 slowdown, would starve it.) Filters are
attached with one rtnetlink message sent from a child that joined the namespace; the
filter holds its own reference to the program, so the file descriptor can be closed.
Deleting the namespace deletes the veth, its filters, programs and (once our map file
descriptors are closed) the maps.

For ``cpumap_cpu_choice`` (kernel/bpf/cpumap.c):

* ``xdp_cpumap`` (native XDP on the receiver veth, ``BPF_PROG_TYPE_XDP``): Ethernet ->
  IPv4 (IHL 5) -> UDP by direct packet access; the UDP source port is looked up in a
  hash map giving a CPU, and the program returns ``bpf_redirect_map(cpumap, cpu,
  XDP_PASS)``; anything else ``XDP_PASS``. Attached with RTM_SETLINK / IFLA_XDP.
* ``cpumap_counter`` (raw tracepoints ``xdp_cpumap_enqueue`` / ``xdp_cpumap_kthread``,
  attached with BPF_RAW_TRACEPOINT_OPEN, so no tracefs): adds each event's
  ``processed`` and ``drops`` to an array slot per CPU (enqueue: the destination CPU,
  slot ``to_cpu``; kthread: the CPU it runs on, slot ``8 + cpu``). cpumap drops are
  visible only there.

Key layout of the port maps: the source port's two bytes in network order, then two
bytes (zero for the setter and the XDP program, the CPU number for the recorder):
``port_key(port, cpu)``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
import struct

SYS_BPF = 321  # x86_64
BPF_MAP_CREATE, BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_PROG_LOAD = 0, 1, 2, 5
BPF_MAP_GET_NEXT_KEY, BPF_RAW_TRACEPOINT_OPEN = 4, 17
BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_CPUMAP = 1, 2, 16
BPF_PROG_TYPE_SCHED_CLS, BPF_PROG_TYPE_XDP, BPF_PROG_TYPE_RAW_TRACEPOINT = 3, 6, 17
FN_MAP_LOOKUP, FN_MAP_UPDATE, FN_CPU, FN_SKB_LOAD_BYTES, FN_SET_HASH = 1, 2, 8, 26, 48
FN_REDIRECT_MAP = 51
FN_MAP_DELETE = 3
FN_KTIME_GET_NS = 5
NET_RX_SOFTIRQ = 3  # include/linux/interrupt.h
SOFTIRQ_SLOTS = 64  # per CPU: struct {u64 start_ns; u64 total_ns; u64 count}
SOFTIRQ_SLOT_SIZE = 24
HANDOFF_STAMPS = 4096  # skbs between netif_rx and their processing, at most
HANDOFF_BUCKETS = 1024  # histogram of the hand-off time in HANDOFF_SHIFT buckets
HANDOFF_SHIFT = 7  # 128 ns buckets: up to 131 us, longer ones in the last
XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)
CPUMAP_STATS_SLOTS = 16  # 0..7: enqueue per destination CPU, 8..15: kthread per CPU
CPUMAP_STATS_SIZE = 16  # struct {u64 processed; u64 drops}
SKB_HASH_OFF, SKB_PROTOCOL_OFF = 68, 16  # offsetof(struct __sk_buff, hash / protocol)
RECORD_SIZE = 16  # struct {u32 hash; u32 changes; u64 packets}
TC_ACT_UNSPEC = -1

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def bpf(cmd: int, attr: bytearray) -> int:
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    ret = libc().syscall(ctypes.c_long(SYS_BPF), ctypes.c_long(cmd), buf,
                         ctypes.c_long(len(attr)))
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf(cmd {cmd}): {os.strerror(e)}")
    return int(ret)


# --- a tiny eBPF assembler ---------------------------------------------------------------

def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def mov64_reg(dst, src):
    return _insn(0xBF, dst, src)


def mov64_imm(dst, imm):
    return _insn(0xB7, dst, 0, 0, imm)


def add64_imm(dst, imm):
    return _insn(0x07, dst, 0, 0, imm)


def ldx(size: str, dst, src, off):
    return _insn({"b": 0x71, "h": 0x69, "w": 0x61, "dw": 0x79}[size], dst, src, off)


def stx(size: str, dst, src, off):
    return _insn({"b": 0x73, "h": 0x6B, "w": 0x63, "dw": 0x7B}[size], dst, src, off)


def st_imm(size: str, dst, off, imm):
    return _insn({"b": 0x72, "h": 0x6A, "w": 0x62, "dw": 0x7A}[size], dst, 0, off, imm)


def jne_imm(dst, imm, off):
    return _insn(0x55, dst, 0, off, imm)


def jeq_imm(dst, imm, off):
    return _insn(0x15, dst, 0, off, imm)


def jeq_reg(dst, src, off):
    return _insn(0x1D, dst, src, off)


def jgt_reg(dst, src, off):
    return _insn(0x2D, dst, src, off)


def and64_imm(dst, imm):
    return _insn(0x57, dst, 0, 0, imm)


def atomic_add64(dst, src, off):
    """``lock *(u64 *)(dst + off) += src`` (BPF_STX | BPF_DW | BPF_ATOMIC, BPF_ADD)."""
    return _insn(0xDB, dst, src, off, 0)


def call(fn):
    return _insn(0x85, 0, 0, 0, fn)


def exit_():
    return _insn(0x95)


def ld_map_fd(dst, fd):
    """``ld_imm64 dst, map`` with BPF_PSEUDO_MAP_FD (two instruction slots)."""
    return _insn(0x18, dst, 1, 0, fd) + _insn(0, 0, 0, 0, 0)


R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)
N = 8  # bytes per instruction


def _parse_udp4(fail_label_len: int) -> list[bytes]:
    """Common prologue. r6 = ctx; stack fp-32..fp-9 = IPv4 header + UDP ports;
    key (u32) at fp-40 = source port bytes + 2 zero bytes. Jumps ``fail`` to the
    epilogue, whose distance from the end of this block is ``fail_label_len`` insns."""
    body: list[bytes] = [
        mov64_reg(R6, R1),
        ldx("w", R2, R6, SKB_PROTOCOL_OFF),
        None,  # if protocol != htons(ETH_P_IP) goto out
        mov64_reg(R1, R6),
        mov64_imm(R2, 14),
        mov64_reg(R3, R10),
        add64_imm(R3, -32),
        mov64_imm(R4, 24),
        call(FN_SKB_LOAD_BYTES),
        None,  # if r0 != 0 goto out
        ldx("b", R2, R10, -32),
        None,  # if version/IHL != 0x45 goto out
        ldx("b", R2, R10, -32 + 9),
        None,  # if protocol != UDP goto out
        st_imm("w", R10, -40, 0),
        ldx("h", R2, R10, -32 + 20),
        stx("h", R10, R2, -40),
    ]
    n = len(body)
    fixes = {2: ("w", 0x0008), 9: ("r0", 0), 11: ("b", 0x45), 13: ("b", 17)}
    for i, (kind, val) in fixes.items():
        off = (n - i - 1) + fail_label_len
        reg = R0 if kind == "r0" else R2
        body[i] = jne_imm(reg, val, off)
    return body


def hash_setter_insns(map_fd: int) -> bytes:
    tail = [
        mov64_reg(R2, R10),
        add64_imm(R2, -40),
        ld_map_fd(R1, map_fd),  # 2 slots
        call(FN_MAP_LOOKUP),
        jeq_imm(R0, 0, 3),
        ldx("w", R2, R0, 0),
        mov64_reg(R1, R6),
        call(FN_SET_HASH),
    ]
    slots = sum(len(b) // N for b in tail)
    head = _parse_udp4(slots)
    out = [mov64_imm(R0, TC_ACT_UNSPEC), exit_()]  # out: next filter, or pass
    return b"".join(head + tail + out)


def flow_recorder_insns(map_fd: int) -> bytes:
    # after the prologue: key = sport | cpu << 16 at fp-40; value template at fp-56
    tail = [
        call(FN_CPU),
        stx("h", R10, R0, -38),
        ldx("w", R7, R6, SKB_HASH_OFF),  # r7 = skb->hash
        mov64_reg(R2, R10),
        add64_imm(R2, -40),
        ld_map_fd(R1, map_fd),  # 2 slots
        call(FN_MAP_LOOKUP),
        jeq_imm(R0, 0, 10),  # -> new entry
        # existing entry (one CPU writes its own key: no races)
        ldx("w", R2, R0, 0),
        jeq_reg(R2, R7, 3),
        ldx("w", R3, R0, 4),
        add64_imm(R3, 1),
        stx("w", R0, R3, 4),
        stx("w", R0, R7, 0),  # same: keep hash
        ldx("dw", R3, R0, 8),
        add64_imm(R3, 1),
        stx("dw", R0, R3, 8),
        _insn(0x05, 0, 0, 11),  # goto out
        # new entry: {hash, 0, 1}
        stx("w", R10, R7, -56),
        st_imm("w", R10, -52, 0),
        st_imm("dw", R10, -48, 1),
        ld_map_fd(R1, map_fd),  # 2 slots
        mov64_reg(R2, R10),
        add64_imm(R2, -40),
        mov64_reg(R3, R10),
        add64_imm(R3, -56),
        mov64_imm(R4, 0),  # BPF_ANY
        call(FN_MAP_UPDATE),
    ]
    slots = sum(len(b) // N for b in tail)
    head = _parse_udp4(slots)
    out = [mov64_imm(R0, TC_ACT_UNSPEC), exit_()]
    return b"".join(head + tail + out)


def xdp_cpumap_insns(ports_fd: int, cpumap_fd: int) -> bytes:
    """XDP: UDP source port -> CPU from the ports map -> ``bpf_redirect_map(cpumap, cpu,
    XDP_PASS)``; no entry, or not Ethernet/IPv4 (IHL 5)/UDP: ``XDP_PASS``."""
    body = [
        mov64_reg(R6, R1),
        ldx("w", R2, R6, 0),  # r2 = ctx->data
        ldx("w", R3, R6, 4),  # r3 = ctx->data_end
        mov64_reg(R4, R2),
        add64_imm(R4, 14 + 20 + 8),
        None,  # if r4 > r3 goto pass (the verifier now knows 42 bytes are there)
        ldx("h", R5, R2, 12),
        None,  # if h_proto != htons(ETH_P_IP) goto pass
        ldx("b", R5, R2, 14),
        None,  # if version/IHL != 0x45 goto pass
        ldx("b", R5, R2, 14 + 9),
        None,  # if protocol != UDP goto pass
        ldx("h", R5, R2, 14 + 20),  # source port, network order as stored
        st_imm("w", R10, -8, 0),
        stx("h", R10, R5, -8),  # key = port_key(sport)
        mov64_reg(R2, R10),
        add64_imm(R2, -8),
        ld_map_fd(R1, ports_fd),  # 2 slots
        call(FN_MAP_LOOKUP),
        None,  # if r0 == 0 goto pass
        ldx("w", R2, R0, 0),  # r2 = cpu
        ld_map_fd(R1, cpumap_fd),  # 2 slots
        mov64_imm(R3, XDP_PASS),  # fallback action when the cpumap has no such entry
        call(FN_REDIRECT_MAP),
        exit_(),
    ]
    # slot index of every entry (ld_map_fd takes two)
    slots, pos = [], 0
    for b in body:
        slots.append(pos)
        pos += 2 if b is not None and len(b) == 16 else 1
    pass_at = pos  # "pass:" follows the body
    fixes = {5: ("jgt", R4, R3), 7: ("jne", R5, 0x0008), 9: ("jne", R5, 0x45),
             11: ("jne", R5, 17), 19: ("jeq", R0, 0)}
    for i, (kind, reg, arg) in fixes.items():
        off = pass_at - (slots[i] + 1)
        body[i] = (jgt_reg(reg, arg, off) if kind == "jgt" else
                   jne_imm(reg, arg, off) if kind == "jne" else jeq_imm(reg, arg, off))
    return b"".join(body + [mov64_imm(R0, XDP_PASS), exit_()])


def cpumap_counter_insns(stats_fd: int, kthread: bool) -> bytes:
    """Raw tracepoint ``xdp_cpumap_enqueue(map_id, processed, drops, to_cpu)`` (slot
    ``to_cpu``) or ``xdp_cpumap_kthread(map_id, processed, drops, sched, stats)`` (slot
    ``8 + this cpu``): add ``processed`` and ``drops`` to the slot."""
    if kthread:
        key = [call(FN_CPU), mov64_reg(R2, R0), add64_imm(R2, 8)]
    else:
        key = [ldx("dw", R2, R6, 24)]  # args[3] = to_cpu
    body = [
        mov64_reg(R6, R1),
        ldx("dw", R7, R6, 8),  # args[1] = processed
        ldx("dw", R8, R6, 16),  # args[2] = drops
        *key,
        and64_imm(R2, CPUMAP_STATS_SLOTS - 1),
        stx("w", R10, R2, -4),
        mov64_reg(R2, R10),
        add64_imm(R2, -4),
        ld_map_fd(R1, stats_fd),  # 2 slots
        call(FN_MAP_LOOKUP),
        jeq_imm(R0, 0, 2),
        atomic_add64(R0, R7, 0),
        atomic_add64(R0, R8, 8),
        mov64_imm(R0, 0),
        exit_(),
    ]
    return b"".join(body)


def softirq_timer_insns(slots_fd: int, entry: bool) -> bytes:
    """Raw tracepoints ``softirq_entry(vec_nr)`` / ``softirq_exit(vec_nr)``
    (include/trace/events/irq.h, fired around each handler in kernel/softirq.c
    handle_softirqs, also in ksoftirqd): for NET_RX only, the entry stamps
    ``bpf_ktime_get_ns()`` into this CPU's slot, the exit adds the elapsed time to
    ``total_ns`` and counts the run. One CPU writes its own slot and NET_RX does not
    nest on a CPU, so no atomics are needed."""
    head = [
        ldx("dw", R7, R1, 0),  # args[0] = vec_nr
        jne_imm(R7, NET_RX_SOFTIRQ, 0),  # patched: to the end
        call(FN_CPU),
        and64_imm(R0, SOFTIRQ_SLOTS - 1),
        stx("w", R10, R0, -4),
        mov64_reg(R2, R10),
        add64_imm(R2, -4),
        ld_map_fd(R1, slots_fd),
        call(FN_MAP_LOOKUP),
        jeq_imm(R0, 0, 0),  # patched: to the end
        mov64_reg(R8, R0),
    ]
    if entry:
        body = [call(FN_KTIME_GET_NS), stx("dw", R8, R0, 0)]
    else:
        body = [
            ldx("dw", R9, R8, 0),
            jeq_imm(R9, 0, 8),  # no entry seen (attached mid-softirq): skip
            call(FN_KTIME_GET_NS),
            _insn(0x1F, R0, R9),  # r0 -= r9
            ldx("dw", R1, R8, 8),
            _insn(0x0F, R1, R0),  # r1 += r0
            stx("dw", R8, R1, 8),
            ldx("dw", R1, R8, 16),
            add64_imm(R1, 1),
            stx("dw", R8, R1, 16),
            st_imm("dw", R8, 0, 0),
        ]
        # the skip lands on the exit sequence: count the instructions after the jump
        body[1] = jeq_imm(R9, 0, len(body) - 2)
    tail = [mov64_imm(R0, 0), exit_()]
    ins = head + body
    # jumps to ``tail``: offsets in instruction slots (ld_map_fd takes two)
    def slots(lst):
        return sum(len(x) // N for x in lst)
    ins[1] = jne_imm(R7, NET_RX_SOFTIRQ, slots(ins[2:]))
    ins[9] = jeq_imm(R0, 0, slots(ins[10:]))
    return b"".join(ins + tail)


def jgt_imm(dst, imm, off):
    return _insn(0x25, dst, 0, off, imm)


def rsh64_imm(dst, imm):
    return _insn(0x77, dst, 0, 0, imm)


def handoff_stamp_insns(stamps_fd: int) -> bytes:
    """Raw tracepoint ``netif_rx(skb)`` (net/core/dev.c ``netif_rx_internal``, before
    ``enqueue_to_backlog``): stamps[skb] = {ktime, this CPU}."""
    ins = [
        ldx("dw", R6, R1, 0),  # args[0] = skb
        stx("dw", R10, R6, -8),
        call(FN_CPU),
        stx("dw", R10, R0, -16),
        call(FN_KTIME_GET_NS),
        stx("dw", R10, R0, -24),
        ld_map_fd(R1, stamps_fd),
        mov64_reg(R2, R10),
        add64_imm(R2, -8),
        mov64_reg(R3, R10),
        add64_imm(R3, -24),  # value: {u64 ns; u64 cpu}
        mov64_imm(R4, 0),  # BPF_ANY
        call(FN_MAP_UPDATE),
        mov64_imm(R0, 0),
        exit_(),
    ]
    return b"".join(ins)


def handoff_hist_insns(stamps_fd: int, hist_fd: int) -> bytes:
    """Raw tracepoint ``netif_receive_skb(skb)`` (``__netif_receive_skb_core``, where
    the processing CPU starts on the packet): for an skb stamped at ``netif_rx`` on
    another CPU, count its hand-off time (ns >> HANDOFF_SHIFT, the last bucket holding
    the rest) and drop the stamp. A packet processed where it was stamped (no RPS hop,
    loopback) is not a hand-off: its stamp is dropped, nothing counted."""
    body = [
        ldx("dw", R6, R1, 0),
        stx("dw", R10, R6, -8),
        ld_map_fd(R1, stamps_fd),
        mov64_reg(R2, R10),
        add64_imm(R2, -8),
        call(FN_MAP_LOOKUP),
        jeq_imm(R0, 0, 0),  # patched: to the end
        ldx("dw", R7, R0, 0),  # t0
        ldx("dw", R8, R0, 8),  # the stamping CPU
        call(FN_KTIME_GET_NS),
        _insn(0x1F, R0, R7),  # r0 -= t0
        rsh64_imm(R0, HANDOFF_SHIFT),
        jgt_imm(R0, HANDOFF_BUCKETS - 2, 1),
        jeq_imm(R0, R0, 1),  # (always) skip the clamp
        mov64_imm(R0, HANDOFF_BUCKETS - 1),
        stx("w", R10, R0, -12),
        ld_map_fd(R1, stamps_fd),
        mov64_reg(R2, R10),
        add64_imm(R2, -8),
        call(FN_MAP_DELETE),
        call(FN_CPU),
        jeq_reg(R0, R8, 0),  # patched: same CPU, to the end
        ld_map_fd(R1, hist_fd),
        mov64_reg(R2, R10),
        add64_imm(R2, -12),
        call(FN_MAP_LOOKUP),
        jeq_imm(R0, 0, 2),
        mov64_imm(R1, 1),
        atomic_add64(R0, R1, 0),
    ]
    def slots(lst):
        return sum(len(x) // N for x in lst)
    body[6] = jeq_imm(R0, 0, slots(body[7:]))
    body[13] = _insn(0x05, 0, 0, 1)  # ja +1: skip the clamp
    body[21] = jeq_reg(R0, R8, slots(body[22:]))
    return b"".join(body + [mov64_imm(R0, 0), exit_()])


def parse_handoff_hist(items: list[tuple[bytes, bytes]]) -> list[int]:
    """Counts per HANDOFF_SHIFT bucket (index = ns >> HANDOFF_SHIFT)."""
    out = [0] * HANDOFF_BUCKETS
    for k, v in items:
        out[struct.unpack("<I", k)[0]] = struct.unpack("<Q", v)[0]
    return out


def parse_softirq_slots(items: list[tuple[bytes, bytes]]) -> dict[int, dict[str, int]]:
    """cpu -> {"ns": NET_RX softirq time, "runs": handler runs} (CPUs with any)."""
    out = {}
    for k, v in items:
        cpu = struct.unpack("<I", k)[0]
        _start, total, count = struct.unpack("<QQQ", v)
        if count:
            out[cpu] = {"ns": total, "runs": count}
    return out


# --- maps and programs --------------------------------------------------------------------

def map_create(key_size: int, value_size: int, max_entries: int, name: bytes,
               map_type: int = BPF_MAP_TYPE_HASH) -> int:
    attr = bytearray(72)
    struct.pack_into("<IIII", attr, 0, map_type, key_size, value_size, max_entries)
    attr[28:28 + min(15, len(name))] = name[:15]
    return bpf(BPF_MAP_CREATE, attr)


def _ptr(buf) -> int:
    return ctypes.addressof(buf)


def map_update(fd: int, key: bytes, value: bytes) -> None:
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value, len(value))
    attr = bytearray(32)
    struct.pack_into("<IIQQQ", attr, 0, fd, 0, _ptr(k), _ptr(v), 0)
    bpf(BPF_MAP_UPDATE_ELEM, attr)


def map_items(fd: int, key_size: int, value_size: int) -> list[tuple[bytes, bytes]]:
    out = []
    cur = None
    while True:
        k = ctypes.create_string_buffer(cur or b"\0" * key_size, key_size)
        nk = ctypes.create_string_buffer(key_size)
        attr = bytearray(32)
        struct.pack_into("<IIQQ", attr, 0, fd, 0, _ptr(k) if cur is not None else 0, _ptr(nk))
        try:
            bpf(BPF_MAP_GET_NEXT_KEY, attr)
        except OSError as err:
            if err.errno == 2:  # ENOENT: no more keys
                break
            raise
        cur = nk.raw
        v = ctypes.create_string_buffer(value_size)
        attr = bytearray(32)
        struct.pack_into("<IIQQ", attr, 0, fd, 0, _ptr(nk), _ptr(v))
        try:
            bpf(BPF_MAP_LOOKUP_ELEM, attr)
        except OSError:
            continue
        out.append((cur, v.raw))
    return out


def map_lookup(fd: int, key: bytes, value_size: int) -> bytes:
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value_size)
    attr = bytearray(32)
    struct.pack_into("<IIQQ", attr, 0, fd, 0, _ptr(k), _ptr(v))
    bpf(BPF_MAP_LOOKUP_ELEM, attr)
    return v.raw


def prog_load(insns: bytes, name: bytes, prog_type: int = BPF_PROG_TYPE_SCHED_CLS) -> int:
    ins = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(1 << 16)
    attr = bytearray(72)
    struct.pack_into("<IIQQIIQ", attr, 0, prog_type, len(insns) // N,
                     _ptr(ins), _ptr(lic), 1, len(log), _ptr(log))
    attr[48:48 + min(15, len(name))] = name[:15]
    try:
        return bpf(BPF_PROG_LOAD, attr)
    except OSError as err:
        text = log.value.decode(errors="replace").strip().splitlines()[-6:]
        raise OSError(err.errno, f"{err.strerror}; verifier: {' | '.join(text)}") from None


def raw_tracepoint_open(name: str, prog_fd: int) -> int:
    """Attach a raw tracepoint program; closing the returned fd detaches it."""
    nm = ctypes.create_string_buffer(name.encode())
    attr = bytearray(16)
    struct.pack_into("<QI", attr, 0, _ptr(nm), prog_fd)
    return bpf(BPF_RAW_TRACEPOINT_OPEN, attr)


def parse_cpumap_stats(items: list[tuple[bytes, bytes]]) -> dict:
    """Array slots -> {"enqueue": {cpu: {processed, drops}}, "kthread": {...}}, only
    slots that saw events."""
    out: dict[str, dict[int, dict[str, int]]] = {"enqueue": {}, "kthread": {}}
    for k, v in items:
        slot = struct.unpack("<I", k)[0]
        processed, drops = struct.unpack("<QQ", v)
        if processed or drops:
            kind = "kthread" if slot >= 8 else "enqueue"
            out[kind][slot % 8] = {"processed": processed, "drops": drops}
    return out


def port_key(port: int, cpu: int = 0) -> bytes:
    return struct.pack(">H", port) + struct.pack("<H", cpu)


def parse_record(key: bytes, value: bytes) -> tuple[int, int, int, int, int]:
    """(port, cpu, last hash, hash changes, packets)."""
    port = struct.unpack(">H", key[:2])[0]
    cpu = struct.unpack("<H", key[2:4])[0]
    h, changes, pkts = struct.unpack("<IIQ", value)
    return port, cpu, h, changes, pkts


# --- attaching: one RTM_NEWTFILTER from inside the namespace --------------------------------

RTM_NEWTFILTER = 44
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 1, 4, 0x200, 0x400
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_BPF_FD, TCA_BPF_NAME, TCA_BPF_FLAGS = 6, 7, 8
TCA_BPF_FLAG_ACT_DIRECT = 1
PARENT = {"ingress": 0xFFFFFFF2, "egress": 0xFFFFFFF3}  # TC_H_MAKE(TC_H_CLSACT, MIN_*)
NLA_F_NESTED = 1 << 15


def _nla(kind: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return struct.pack("<HH", n, kind) + payload + b"\0" * ((4 - n % 4) % 4)


def tc_filter_msg(ifindex: int, direction: str, prog_fd: int, name: str,
                  prio: int = 1) -> bytes:
    info = (prio << 16) | socket.htons(0x0003)  # TC_H_MAKE(prio << 16, htons(ETH_P_ALL))
    tcm = struct.pack("<BBHiIII", socket.AF_UNSPEC, 0, 0, ifindex, 0, PARENT[direction], info)
    opts = (_nla(TCA_BPF_FD, struct.pack("<I", prog_fd))
            + _nla(TCA_BPF_NAME, name.encode() + b"\0")
            + _nla(TCA_BPF_FLAGS, struct.pack("<I", TCA_BPF_FLAG_ACT_DIRECT)))
    body = tcm + _nla(TCA_KIND, b"bpf\0") + _nla(TCA_OPTIONS | NLA_F_NESTED, opts)
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return struct.pack("<IHHII", 16 + len(body), RTM_NEWTFILTER, flags, 1, 0) + body


def netlink_request(msg: bytes) -> None:
    """Send one rtnetlink request in the current namespace; raise on a negative ack."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    try:
        s.bind((0, 0))
        s.sendto(msg, (0, 0))
        data = s.recv(65536)
        if len(data) >= 20:
            _ln, typ, _fl, _seq, _pid = struct.unpack_from("<IHHII", data, 0)
            if typ == 2:  # NLMSG_ERROR
                err = struct.unpack_from("<i", data, 16)[0]
                if err != 0:
                    raise OSError(-err, f"rtnetlink: {os.strerror(-err)}")
    finally:
        s.close()


RTM_SETLINK = 19
IFLA_XDP, IFLA_XDP_FD, IFLA_XDP_FLAGS = 43, 1, 3
XDP_FLAGS_DRV_MODE = 1 << 2


def xdp_link_msg(ifindex: int, prog_fd: int, flags: int = XDP_FLAGS_DRV_MODE) -> bytes:
    """RTM_SETLINK with IFLA_XDP {FD, FLAGS}: attach (``prog_fd`` >= 0) or detach (-1)."""
    ifi = struct.pack("<BBHiII", socket.AF_UNSPEC, 0, 0, ifindex, 0, 0)
    xdp = (_nla(IFLA_XDP_FD, struct.pack("<i", prog_fd))
           + _nla(IFLA_XDP_FLAGS, struct.pack("<I", flags)))
    body = ifi + _nla(IFLA_XDP | NLA_F_NESTED, xdp)
    return struct.pack("<IHHII", 16 + len(body), RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK,
                       1, 0) + body


def xdp_attach(dev: str, prog_fd: int) -> None:
    """Attach ``prog_fd`` as native (driver mode) XDP on ``dev`` in the current
    namespace, or detach with -1 (run it with ``host.in_netns``)."""
    netlink_request(xdp_link_msg(socket.if_nametoindex(dev), prog_fd))


def tc_attach(dev: str, direction: str, prog_fd: int, name: str, prio: int = 1) -> None:
    """Attach ``prog_fd`` as a direct-action cls_bpf filter on ``dev``'s clsact hook in
    the current namespace (run it with ``host.in_netns``; the fd is inherited). Filters
    run in ``prio`` order (lowest first; the newest first within one ``prio``); ours
    return TC_ACT_UNSPEC, so every later filter still sees the packet."""
    netlink_request(tc_filter_msg(socket.if_nametoindex(dev), direction, prog_fd, name, prio))
