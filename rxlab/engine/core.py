"""The event calendar: a preallocated binary heap of event records (jitted).

SimPy's shape (``schedule``/``step``/``run`` over ``(time, priority, seq)``) kept over
numpy columns so numba can run it without Python objects. The monotone ``seq`` makes
ties deterministic: events at the same time and priority run in scheduling order, so
reruns are bit-identical. The engine knows nothing of NICs or kernels: an event is a
``kind`` and an ``arg``; ``rxlab.kernel.rx_loop`` maps kinds to mechanisms.

Events follow the kernel's batching (an interrupt, a NAPI poll, an IPI, a wake-up), never
one heap operation per packet: packet arrivals stream beside the heap (see rx_loop).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from rxlab.config import JIT_HELPER, JIT_LEAF

INF_TIME = np.int64(2**62)

# Priorities at equal times, named after the contexts they model: hardware interrupts
# are taken before the softirq that they raise, softirq before process context.
PRIO_FIRST = -1  # work already under way that a chunk boundary cut: it goes on first
PRIO_HARDIRQ = 0  # NIC interrupt, IPI: delivered before the CPU picks its next work
PRIO_CPU = 1  # a CPU finished a segment (NAPI poll, app read) and dispatches again
PRIO_WAKE = 2  # a sleeping thread becomes runnable after the CPU state settled
PRIO_TIMER = 3  # periodic services (driver service task, samplers)

_SEQ_BITS = 56  # (prio << 56) | seq: one int64 secondary key, seq < 2**56


class Calendar(NamedTuple):
    # one record per pending event, [time ns, (prio << 56) | seq, kind, arg]: a heap move
    # copies one 32-byte record instead of touching four columns
    heap: np.ndarray  # int64[capacity, 4]
    n: np.ndarray  # int64[2]: [size, next seq]
    # the earliest event, held outside the heap: [valid, time, key, kind, arg]. An event
    # scheduled ahead of everything (a CPU kicked now, a segment ending before any other
    # event) is popped without touching the heap; ordering is unchanged (same keys).
    first: np.ndarray  # int64[5]


H_TIME, H_KEY, H_KIND, H_ARG = range(4)  # a heap record's fields
N_SIZE, N_SEQ = range(2)  # Calendar.n
F_VALID, F_TIME, F_KEY, F_KIND, F_ARG = range(5)  # Calendar.first


def new_calendar(capacity: int) -> Calendar:
    return Calendar(np.zeros((capacity, 4), np.int64), np.zeros(2, np.int64),
                    np.zeros(5, np.int64))  # heap records, (N_SIZE, N_SEQ), first (F_*)


@njit(**JIT_LEAF)
def clear(ev):
    """Drop every pending event (the sequence counter keeps counting)."""
    ev.n[N_SIZE] = 0
    ev.first[F_VALID] = 0


@njit(**JIT_LEAF)
def _heap_push(ev, t, key, kind, arg):
    """Sift up with a hole: parents move down until (t, key) fits, then it is written."""
    h = ev.heap
    n = ev.n[N_SIZE]
    if n >= h.shape[0]:
        raise RuntimeError("event calendar full: capacity too small for this scenario")
    ev.n[N_SIZE] = n + 1
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        tp = h[parent, H_TIME]
        if t < tp or (t == tp and key < h[parent, H_KEY]):
            h[i, H_TIME] = tp
            h[i, H_KEY] = h[parent, H_KEY]
            h[i, H_KIND] = h[parent, H_KIND]
            h[i, H_ARG] = h[parent, H_ARG]
            i = parent
        else:
            break
    h[i, H_TIME] = t
    h[i, H_KEY] = key
    h[i, H_KIND] = kind
    h[i, H_ARG] = arg


@njit(**JIT_HELPER)
def schedule(ev, t, prio, kind, arg):
    """Add an event; raises if the preallocated calendar is full (a sizing bug).

    Callers pass constants (``PRIO_CPU``, ``EV_CPU``); numba would compile ``_schedule``
    once per combination of literal arguments, so they are passed on as int64."""
    _schedule(ev, np.int64(t), np.int64(prio), np.int64(kind), np.int64(arg))


@njit(**JIT_LEAF)
def _schedule(ev, t, prio, kind, arg):
    key = (np.int64(prio) << _SEQ_BITS) | ev.n[N_SEQ]
    ev.n[N_SEQ] += 1
    f = ev.first
    if f[F_VALID] == 0:
        h0t = ev.heap[0, H_TIME]
        if ev.n[N_SIZE] > 0 and (h0t < t or (h0t == t and ev.heap[0, H_KEY] < key)):
            _heap_push(ev, t, key, kind, arg)
            return
    elif f[F_TIME] < t or (f[F_TIME] == t and f[F_KEY] < key):
        _heap_push(ev, t, key, kind, arg)
        return
    else:
        _heap_push(ev, f[F_TIME], f[F_KEY], f[F_KIND], f[F_ARG])  # the new event goes ahead of it
    f[F_VALID] = 1
    f[F_TIME] = t
    f[F_KEY] = key
    f[F_KIND] = kind
    f[F_ARG] = arg


@njit(**JIT_LEAF)
def peek_time(ev):
    if ev.first[F_VALID]:
        return ev.first[F_TIME]
    return ev.heap[0, H_TIME] if ev.n[N_SIZE] > 0 else INF_TIME


@njit(**JIT_LEAF)
def pending(ev):
    """Events waiting in the calendar."""
    return ev.n[N_SIZE] + ev.first[F_VALID]


@njit(**JIT_LEAF)
def pop(ev):
    """Remove the earliest event; returns (time, kind, arg)."""
    f = ev.first
    if f[F_VALID]:
        f[F_VALID] = 0
        return f[F_TIME], f[F_KIND], f[F_ARG]
    h = ev.heap
    t = h[0, H_TIME]
    kind = h[0, H_KIND]
    arg = h[0, H_ARG]
    n = ev.n[N_SIZE] - 1
    ev.n[N_SIZE] = n
    if n > 0:
        # sift the last record down from the root with a hole: the smaller child moves
        # up until the record fits (the same comparisons as swapping, half the moves)
        xt = h[n, H_TIME]
        xk = h[n, H_KEY]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            ct = h[c, H_TIME]
            ck = h[c, H_KEY]
            r = c + 1
            if r < n:
                rt = h[r, H_TIME]
                if rt < ct or (rt == ct and h[r, H_KEY] < ck):
                    c = r
                    ct = rt
                    ck = h[r, H_KEY]
            if ct < xt or (ct == xt and ck < xk):
                h[i, H_TIME] = ct
                h[i, H_KEY] = ck
                h[i, H_KIND] = h[c, H_KIND]
                h[i, H_ARG] = h[c, H_ARG]
                i = c
            else:
                break
        h[i, H_TIME] = xt
        h[i, H_KEY] = xk
        h[i, H_KIND] = h[n, H_KIND]
        h[i, H_ARG] = h[n, H_ARG]
    return t, kind, arg
