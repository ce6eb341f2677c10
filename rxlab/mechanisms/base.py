"""What a mechanism declares about itself, beside its algorithm.

A mechanism's algorithm is compiled code under its kernel names (``code``: the modules
that hold it). Everything else the rest of rxlab needs to know about it is declared here,
once, as data: the cost stages its code charges (each with the kernel function that
spends the time), the drop reasons it counts, the event kinds it posts, its counters as a
struct, the kernel-version flags it reads, the scenario fields that configure it, the
result blocks it fills and the arrays of its state with their shapes from the scenario
(what ``build`` allocates and the memory estimate adds up). ``kernel/stages.py``,
``kernel/drop_reasons.py``, ``kernel/events.py`` and the counter dtypes are derived from
these declarations, and tests/test_mechanisms.py checks each declaration against the
scenario model, the version flags, the output schema, the cost profiles and docs/model.md.

Declarations import no module of the loop's mechanisms (only numpy, the record dtypes of
kernel/state.py, kernel/constants.py and kernel/hashfn.py's integer helpers), so the
modules that compile the loop can read them at import without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

import numpy as np


@dataclass(frozen=True)
class Stage:
    """A cost stage: ns of CPU time (or of delay) per unit, set by the cost profile."""

    name: str  # the profile's key (rxlab/profiles/*.yaml)
    kernel: str  # where the kernel spends it: file and function
    per_packet: bool = False  # per-packet CPU work, so jittered (host.cost_jitter)


@dataclass(frozen=True)
class Drop:
    """A drop reason: ``enum skb_drop_reason``'s name where the kernel has one."""

    name: str
    doc: str  # what the kernel calls it and which counter shows it


@dataclass(frozen=True)
class Event:
    """An event kind the mechanism posts to the calendar (``rx_loop.handle_event``)."""

    name: str  # EV_<NAME> in kernel/events.py
    doc: str  # what its arg is and what it models


@dataclass(frozen=True)
class Counter:
    name: str  # the field of the counter struct and its name in the result
    doc: str


@dataclass(frozen=True)
class Array:
    """One array of the mechanism's state, its shape from the scenario: what ``build``
    allocates and what the memory estimate adds up (``rxlab/memory_budget.py``)."""

    name: str  # the field of its state NamedTuple (kernel/state.py)
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * np.dtype(self.dtype).itemsize

    def zeros(self) -> np.ndarray:
        return np.zeros(self.shape, self.dtype)


@dataclass(frozen=True)
class Mechanism:
    name: str
    kernel: str  # the kernel source it follows (files, functions)
    code: tuple[str, ...]  # rxlab modules holding its algorithm (docs/model.md rows)
    stages: tuple[Stage, ...] = ()
    drops: tuple[Drop, ...] = ()
    events: tuple[Event, ...] = ()
    counters: tuple[Counter, ...] = ()  # its counter struct's fields (int64 each)
    flags: tuple[str, ...] = ()  # kernel/versions.py KernelBehaviour fields it reads
    knobs: tuple[str, ...] = ()  # scenario fields ("apps[].rcvbuf": a list's items)
    output: tuple[str, ...] = ()  # top-level result keys it fills
    # its state's arrays for a validated scenario, and the scenario field that sizes them
    # most (the memory estimate's refusal names it)
    arrays: Callable[..., tuple[Array, ...]] | None = None
    sized_by: str = ""
    state_in: str = ""  # the Model field whose NamedTuple holds them (sd, rf, ...)

    def state(self, sc) -> dict[str, Array]:
        return {a.name: a for a in self.arrays(sc)} if self.arrays else {}

    def nbytes(self, sc) -> int:
        """Bytes of the arrays its state keeps for scenario ``sc``."""
        return sum(a.nbytes for a in self.state(sc).values())

    @property
    def counter_dtype(self) -> np.dtype:
        """The counter struct: one int64 field per counter, in declared order (the
        state keeps one record, or one per entry, of it)."""
        return np.dtype([(c.name, np.int64) for c in self.counters], align=True)
