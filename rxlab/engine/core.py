"""The event calendar: a preallocated binary heap over array columns (jitted).

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

from rxlab.config import JIT_LEAF

INF_TIME = np.int64(2**62)

# Priorities at equal times, named after the contexts they model: hardware interrupts
# are taken before the softirq that they raise, softirq before process context.
PRIO_HARDIRQ = 0  # NIC interrupt, IPI: delivered before the CPU picks its next work
PRIO_CPU = 1  # a CPU finished a segment (NAPI poll, app read) and dispatches again
PRIO_WAKE = 2  # a sleeping thread becomes runnable after the CPU state settled
PRIO_TIMER = 3  # periodic services (driver service task, samplers)

_SEQ_BITS = 56  # (prio << 56) | seq: one int64 secondary key, seq < 2**56


class Calendar(NamedTuple):
    time: np.ndarray  # int64 ns
    key: np.ndarray  # int64 (prio << 56) | seq
    kind: np.ndarray  # int64
    arg: np.ndarray  # int64
    n: np.ndarray  # int64[2]: [size, next seq]
    # the earliest event, held outside the heap: [valid, time, key, kind, arg]. An event
    # scheduled ahead of everything (a CPU kicked now, a segment ending before any other
    # event) is popped without touching the heap; ordering is unchanged (same keys).
    first: np.ndarray  # int64[5]


def new_calendar(capacity: int) -> Calendar:
    return Calendar(
        np.zeros(capacity, np.int64),
        np.zeros(capacity, np.int64),
        np.zeros(capacity, np.int64),
        np.zeros(capacity, np.int64),
        np.zeros(2, np.int64),
        np.zeros(5, np.int64),
    )


@njit(**JIT_LEAF)
def clear(ev):
    """Drop every pending event (the sequence counter keeps counting)."""
    ev.n[0] = 0
    ev.first[0] = 0


@njit(**JIT_LEAF)
def _less(ev, i, j):
    ti = ev.time[i]
    tj = ev.time[j]
    return ti < tj or (ti == tj and ev.key[i] < ev.key[j])


@njit(**JIT_LEAF)
def _swap(ev, i, j):
    ev.time[i], ev.time[j] = ev.time[j], ev.time[i]
    ev.key[i], ev.key[j] = ev.key[j], ev.key[i]
    ev.kind[i], ev.kind[j] = ev.kind[j], ev.kind[i]
    ev.arg[i], ev.arg[j] = ev.arg[j], ev.arg[i]


@njit(**JIT_LEAF)
def _heap_push(ev, t, key, kind, arg):
    n = ev.n[0]
    if n >= ev.time.size:
        raise RuntimeError("event calendar full: capacity too small for this scenario")
    ev.time[n] = t
    ev.key[n] = key
    ev.kind[n] = kind
    ev.arg[n] = arg
    ev.n[0] = n + 1
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if _less(ev, i, parent):
            _swap(ev, i, parent)
            i = parent
        else:
            break


@njit(**JIT_LEAF)
def schedule(ev, t, prio, kind, arg):
    """Add an event; raises if the preallocated calendar is full (a sizing bug)."""
    key = (np.int64(prio) << _SEQ_BITS) | ev.n[1]
    ev.n[1] += 1
    f = ev.first
    if f[0] == 0:
        if ev.n[0] > 0 and (ev.time[0] < t or (ev.time[0] == t and ev.key[0] < key)):
            _heap_push(ev, t, key, kind, arg)
            return
    elif f[1] < t or (f[1] == t and f[2] < key):
        _heap_push(ev, t, key, kind, arg)
        return
    else:
        _heap_push(ev, f[1], f[2], f[3], f[4])  # the new event goes ahead of it
    f[0] = 1
    f[1] = t
    f[2] = key
    f[3] = kind
    f[4] = arg


@njit(**JIT_LEAF)
def peek_time(ev):
    if ev.first[0]:
        return ev.first[1]
    return ev.time[0] if ev.n[0] > 0 else INF_TIME


@njit(**JIT_LEAF)
def pending(ev):
    """Events waiting in the calendar."""
    return ev.n[0] + ev.first[0]


@njit(**JIT_LEAF)
def pop(ev):
    """Remove the earliest event; returns (time, kind, arg)."""
    f = ev.first
    if f[0]:
        f[0] = 0
        return f[1], f[3], f[4]
    t = ev.time[0]
    kind = ev.kind[0]
    arg = ev.arg[0]
    n = ev.n[0] - 1
    ev.n[0] = n
    if n > 0:
        ev.time[0] = ev.time[n]
        ev.key[0] = ev.key[n]
        ev.kind[0] = ev.kind[n]
        ev.arg[0] = ev.arg[n]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= n:
                break
            small = left
            right = left + 1
            if right < n and _less(ev, right, left):
                small = right
            if _less(ev, small, i):
                _swap(ev, small, i)
                i = small
            else:
                break
    return t, kind, arg
