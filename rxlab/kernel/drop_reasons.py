"""Why a packet was dropped: one drop path (``accounting.drop``), one reason each.

Each reason is declared by the mechanism that drops (``rxlab/mechanisms/``), named after
the kernel's ``enum skb_drop_reason`` (include/net/dropreason-core.h) where one exists;
``DROP_<NAME>`` is a reason's index into the drop counters.
"""

from rxlab.mechanisms import DROPS, index_of

# name -> what the kernel calls it and which counter shows it (the output's meaning)
DROP_REASON_DOC = {d.name: d.doc for d in DROPS}
DROP_REASONS = tuple(DROP_REASON_DOC)
N_DROP_SLOTS = len(DROP_REASONS)  # a column per reason (Stats.cnt, ts_drop)

DROP_RING_FULL = index_of(DROPS, "ring_full")
DROP_NIC_OVERRUN = index_of(DROPS, "nic_overrun")
DROP_BACKLOG = index_of(DROPS, "backlog")
DROP_FLOW_LIMIT = index_of(DROPS, "flow_limit")
DROP_SOCKET_RCVBUF = index_of(DROPS, "socket_rcvbuf")
DROP_NO_SOCKET = index_of(DROPS, "no_socket")
DROP_XDP_DROP = index_of(DROPS, "xdp_drop")
DROP_XDP_ABORTED = index_of(DROPS, "xdp_aborted")
DROP_CPUMAP_FULL = index_of(DROPS, "cpumap_full")
DROP_XSK_RX_FULL = index_of(DROPS, "xsk_rx_ring_full")
DROP_XSK_FILL_EMPTY = index_of(DROPS, "xsk_fill_empty")
DROP_SOCKET_BACKLOG = index_of(DROPS, "socket_backlog")
