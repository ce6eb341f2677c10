"""The CPU's cycle counter, read from compiled code (``llvm.readcyclecounter``: RDTSC on
x86-64, the virtual counter on arm64), for the loop's profile (``rxlab.kernel.profile``).

``PROFILE`` is a compile-time switch: ``RXLAB_PROFILE=1`` in the environment before rxlab
is imported compiles the profile's counters into the loop (into its own numba cache
folder, ``rxlab._cache``); otherwise every profile call compiles to nothing.
"""

import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from rxlab.config import JIT_LEAF

PROFILE = os.environ.get("RXLAB_PROFILE") == "1"


@intrinsic
def _readcyclecounter(typingctx):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@njit(**JIT_LEAF)
def cycles():
    """The cycle counter now (callable from Python too, to scale cycles to seconds)."""
    return np.int64(_readcyclecounter())
