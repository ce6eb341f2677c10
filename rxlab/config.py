"""One place for numba options (stumpy's config.py idea).

Every ``@njit`` in rxlab takes its options from here; ``fastmath`` stays off because
results must be bit-exact (hashes, u32 wrap-around) and reproducible across runs.
``cache=True`` keeps the second start-up of the CLI under a second.

``JIT_LOOP`` is for the event loop and the mechanisms it calls (measured with perf and
micro-benchmarks, see docs/performance.md):
- they never allocate, so numba's reference counting is off (``_nrt=False``): with it
  on, every read of a state array paid an atomic incref/decref (~75 % of run time);
- they are inlined into the loop (``inline="always"``): numba passes a NamedTuple of
  arrays as hundreds of flattened arguments, ~100 ns per out-of-line call.
"""

JIT = dict(cache=True, fastmath=False, nogil=True)
JIT_LOOP = dict(JIT, _nrt=False, inline="always")
JIT_LOOP_ENTRY = dict(JIT, _nrt=False)  # the loop itself (not inlined anywhere)
