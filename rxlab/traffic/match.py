"""Which flows a rule's match selects (ethtool n-tuple rules, XDP program rules)."""

from __future__ import annotations

import numpy as np

from rxlab.errors import UsageError
from rxlab.traffic.flows import FlowTable


def match_mask(mt, fl: FlowTable, where: str, rxq: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of the flows ``mt`` (proto, src_port, dst_port, group[, rx_queue])
    selects; ``where`` names the rule in errors."""
    m = np.ones(len(fl), bool)
    if mt.proto:
        m &= fl.proto == (6 if mt.proto == "tcp" else 17)
    if mt.src_port is not None:
        m &= fl.sport == mt.src_port
    if mt.dst_port is not None:
        m &= fl.dport == mt.dst_port
    if mt.group is not None:
        if mt.group not in fl.group_names:
            raise UsageError(f"{where}.match.group: no traffic group {mt.group!r} "
                             f"(groups: {', '.join(fl.group_names)})")
        m &= fl.group == fl.group_names.index(mt.group)
    q = getattr(mt, "rx_queue", None)
    if q is not None and rxq is not None:
        m &= rxq == q
    return m
