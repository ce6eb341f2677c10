"""Deterministic random draws inside jitted code (state passed in, never global).

xorshift64* (Vigna 2014) over a uint64 state cell: small, fast and reproducible in
both jitted and NUMBA_DISABLE_JIT modes. Cost jitter draws from it in event order, so
the same scenario and seed give the same draws whatever the chunk size.
"""

import math

import numpy as np
from numba import njit

from rxlab.config import JIT_LEAF

JITTER_NONE = 0
JITTER_EXP = 1
JITTER_LOGNORMAL = 2


def new_state(seed: int) -> np.ndarray:
    # splitmix64 of the seed so that small seeds give well-mixed states; never zero
    z = (seed + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return np.array([z or 1], dtype=np.uint64)


@njit(**JIT_LEAF)
def uniform(state):
    """A double in (0, 1)."""
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    r = x * np.uint64(0x2545F4914F6CDD1D)
    return ((r >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740994.0)


@njit(**JIT_LEAF)
def jittered(state, mean, kind, sigma):
    """A service time with the given mean: deterministic, exponential or lognormal."""
    if kind == JITTER_NONE or mean <= 0.0:
        return mean
    if kind == JITTER_EXP:
        return -mean * math.log(uniform(state))
    # lognormal with E = mean: mu = ln(mean) - sigma^2/2; Box-Muller for the normal
    u1 = uniform(state)
    u2 = uniform(state)
    z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
    return mean * math.exp(sigma * z - 0.5 * sigma * sigma)
