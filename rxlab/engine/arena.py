"""Put a model's state arrays in one huge-page arena (pure Python, no compiled code).

Why: the event loop touches a few elements in dozens of arrays per event (per-CPU,
per-queue, per-socket and per-flow columns). Allocated one by one, those arrays are
spread over thousands of 4 KiB pages, and on a 144-CPU host nearly every touch missed
the TLB: the aRFS benchmark ran 830-940 ns per packet with separate arrays and 700 ns
with the same arrays copied into one 2 MiB-aligned region (measured on this machine,
see docs/performance.md). In a virtual machine a TLB miss is a two-dimensional page walk,
so this matters more than cache lines: interleaving the arrays per CPU (structure of
records) gained nothing beyond it.

The copies are C-contiguous views of the arena with the same shapes and dtypes, so the
compiled loop sees exactly the same types (no new specialisation) and the results are
bit-identical. The arena lives as long as any of its views.
"""

from __future__ import annotations

import mmap
from typing import NamedTuple

import numpy as np

HUGE_PAGE = 1 << 21
_ALIGN = 64  # one cache line: no array shares a line with its neighbour


def _arrays(parts: list[NamedTuple]) -> list[np.ndarray]:
    return [a for part in parts for a in part if isinstance(a, np.ndarray)]


def _buffer(nbytes: int) -> np.ndarray:
    """A zeroed, writable byte array whose start is 2 MiB-aligned, huge pages advised."""
    size = nbytes + HUGE_PAGE
    try:
        # private: a shared anonymous mapping is shmem, which gets no transparent huge pages
        mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            mm.madvise(mmap.MADV_HUGEPAGE)
        raw = np.frombuffer(mm, np.uint8)
    except (OSError, ValueError):  # no anonymous mmap: plain memory, same layout
        raw = np.zeros(size, np.uint8)
    start = (-raw.ctypes.data) % HUGE_PAGE
    return raw[start:start + nbytes]


def relocate(parts: list[NamedTuple]) -> list[NamedTuple]:
    """Copies of ``parts`` (NamedTuples of arrays and scalars) with every array moved
    into one arena; non-array fields are kept as they are."""
    arrays = _arrays(parts)
    sizes = [-(-a.nbytes // _ALIGN) * _ALIGN for a in arrays]
    buf = _buffer(max(sum(sizes), _ALIGN))
    moved: dict[int, np.ndarray] = {}
    off = 0
    for a, size in zip(arrays, sizes, strict=True):
        if id(a) in moved:
            continue  # one array in two fields stays one array
        view = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        moved[id(a)] = view
        off += size
    return [
        type(part)(*(moved.get(id(v), v) if isinstance(v, np.ndarray) else v for v in part))
        for part in parts
    ]
