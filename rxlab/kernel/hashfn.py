"""Small integer hashes of include/linux/hash.h and include/linux/math.h, plus u32 wrap helpers.

Every jitted helper does its arithmetic in int64/uint64 with explicit masks, so it gives
the same numbers compiled and under ``NUMBA_DISABLE_JIT=1`` (numpy scalars, Python ints).
"""

import numpy as np
from numba import njit

from rxlab.config import JIT

GOLDEN_RATIO_32 = 0x61C88647
U32_MASK = 0xFFFFFFFF


@njit(**JIT)
def hash_32(v, bits):
    """hash_32() of include/linux/hash.h (generic): ``u32(v * GOLDEN_RATIO_32) >> (32 - bits)``.

    ``bits`` must be 1..32. In C ``bits == 0`` shifts a u32 by 32, which is undefined
    behaviour (x86 would return the product unshifted), so it is rejected here.
    """
    if bits < 1 or bits > 32:
        raise ValueError("hash_32: bits must be in 1..32 (bits == 0 is undefined in C)")
    # (2**32 - 1) * GOLDEN_RATIO_32 < 2**63: the product fits int64 before masking.
    prod = ((np.int64(v) & U32_MASK) * GOLDEN_RATIO_32) & U32_MASK
    return prod >> (32 - bits)


@njit(**JIT)
def reciprocal_scale(v, n):
    """reciprocal_scale() of include/linux/math.h: ``(u64)v * n >> 32``, maps a u32 onto [0, n).

    Uses the high bits of ``v``. The product of two u32 can reach 2**64 - 2**33 + 1, so it
    is formed in uint64 (int64 would overflow).
    """
    a = np.uint64(np.int64(v) & U32_MASK)
    b = np.uint64(np.int64(n) & U32_MASK)
    return np.int64((a * b) >> np.uint64(32))


@njit(**JIT)
def s32_diff(a, b):
    """The kernel's ``(int)(a - b)`` on u32 free-running counters (net/core/dev.c queue math).

    The difference is taken modulo 2**32 and reinterpreted as signed 32-bit, so a counter
    that wrapped still compares as "just ahead": ``s32_diff(1, 0xffffffff) == 2``.
    """
    d = (np.int64(a) - np.int64(b)) & U32_MASK
    if d >= 0x80000000:
        d -= 0x100000000
    return d


def roundup_pow_of_two(n: int) -> int:
    """roundup_pow_of_two() of include/linux/log2.h: smallest power of two >= n (n >= 1)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"roundup_pow_of_two: n must be >= 1, got {n}")
    return 1 << (n - 1).bit_length()


def ilog2(n: int) -> int:
    """ilog2() of include/linux/log2.h: floor(log2(n)) for n >= 1 (ilog2(0) is undefined)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"ilog2: n must be >= 1, got {n}")
    return n.bit_length() - 1
