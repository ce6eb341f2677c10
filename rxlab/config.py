"""One place for numba options (stumpy's config.py idea).

Every ``@njit`` in rxlab takes its options from here; ``fastmath`` stays off because
results must be bit-exact (hashes, u32 wrap-around) and reproducible across runs.
``cache=True`` keeps the second start-up of the CLI under a second.

The event loop and the mechanisms it calls never allocate, so numba's reference counting
is off there (``_nrt=False``): with it on, every read of a state array paid an atomic
incref/decref (~75 % of the run time under perf). Mechanisms that take the whole state
``s`` are inlined into the loop (``JIT_STATE``), because numba passes a NamedTuple of
arrays as hundreds of flattened arguments (~100 ns per out-of-line call); leaf helpers
that take a few arrays or scalars stay out of line (``JIT_LEAF``) to keep compile time
down.
"""

JIT = dict(cache=True, fastmath=False, nogil=True)
JIT_LEAF = dict(JIT, _nrt=False)
JIT_STATE = dict(JIT_LEAF, inline="always")
# Mechanisms that take ``s`` but run once per batch or rarely (a cpumap kthread loop, a
# bulk flush, a timer, a migration) stay out of line: numba inlines at its IR level, so
# every call site of an inlined mechanism is a copy that type inference and LLVM work
# through again; out of line, compile time stays bounded at ~100 ns per call.
JIT_STATE_OUTLINE = JIT_LEAF
