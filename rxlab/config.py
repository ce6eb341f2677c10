"""One place for numba options (stumpy's config.py idea).

Every ``@njit`` in rxlab takes its options from here; ``fastmath`` stays off because
results must be bit-exact (hashes, u32 wrap-around) and reproducible across runs.
``cache=True`` keeps the second start-up of the CLI under a second.

The event loop and the mechanisms it calls never allocate, so numba's reference counting
is off there (``_nrt=False``): with it on, every read of a state array paid an atomic
incref/decref (~75 % of the run time under perf).

Mechanisms that take the whole state ``s`` are compiled once each and inlined by LLVM
(``JIT_STATE``: ``forceinline`` marks them ``alwaysinline``), so the hot path is still one
function: an out-of-line call would pass the NamedTuple of arrays as hundreds of
flattened values (~165 ns per call). Inlining them at numba's IR level instead
(``inline="always"``) gave the same loop but compiled twice as long in three times the
memory (docs/performance.md). Tiny helpers called with a constant argument (a cost
stage, a drop reason, a CPU-time category) are inlined by numba (``JIT_HELPER``): numba
compiles a separate specialisation of a function for every distinct literal argument.
The event loop's glue (``handle_event``, ``dispatch``) is numba-inlined too: each
function that LLVM inlines is still compiled on its own with everything it calls inlined,
so a function whose callees are the whole loop would be compiled as a second whole loop.
Leaf helpers that take a few arrays or scalars stay out of line (``JIT_LEAF``).

Functions that take ``s`` are only ever called from compiled code, so numba builds no
CPython wrapper for them (``no_cpython_wrapper``, as numba does for its own
``@overload`` implementations): the wrapper would unbox and box the whole state, and
building ~120 of them was ~40 % of the cold compile (docs/performance.md). Calling one
from Python would jump to a null entry point, so ``tests/test_jit_entry.py`` checks that
every such function takes ``s`` and that no Python code calls one.

No function gets a C-callable wrapper either (``no_cfunc_wrapper``): rxlab never takes a
jitted function's address as a C callback (``@cfunc``, ``.ctypes``, first-class function
values), and the wrapper of a function marked ``alwaysinline`` inlined a whole copy of its
body, ~8 CPU s of machine code over the loop's functions (docs/performance.md).
"""

JIT = dict(cache=True, fastmath=False, nogil=True, no_cfunc_wrapper=True)
JIT_LEAF = dict(JIT, _nrt=False)
JIT_INNER = dict(JIT_LEAF, no_cpython_wrapper=True)  # called from compiled code only
JIT_STATE = dict(JIT_INNER, forceinline=True)
JIT_HELPER = dict(JIT_LEAF, inline="always")
# Mechanisms that take ``s`` but run once per batch or rarely (a cpumap kthread loop, a
# bulk flush, a timer, a migration) are not marked for inlining, so that their code is
# not copied into every caller: ~165 ns per call is nothing at that rate.
JIT_STATE_OUTLINE = JIT_INNER
