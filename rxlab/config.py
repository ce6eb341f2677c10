"""One place for numba options (stumpy's config.py idea).

Every ``@njit`` in rxlab takes its options from here; ``fastmath`` stays off because
results must be bit-exact (hashes, u32 wrap-around) and reproducible across runs.
``cache=True`` keeps the second start-up of the CLI under a second.
"""

JIT = dict(cache=True, fastmath=False, nogil=True)
