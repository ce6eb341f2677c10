"""Why a packet was dropped: one drop path (``accounting.drop``), one reason each.

Names follow the kernel's ``enum skb_drop_reason`` (include/net/dropreason-core.h) where
one exists; ``DROP_<NAME>`` is a reason's index into the drop counters.
"""

DROP_REASONS = (
    "ring_full",  # NIC rx ring had no free descriptor (rx_missed / rx_no_buffer)
    "nic_overrun",  # NIC packet-rate ceiling exceeded (rx_fifo_errors)
    "backlog",  # enqueue_to_backlog: qlen > netdev_max_backlog (CPU_BACKLOG)
    "flow_limit",  # skb_flow_limit said drop (counted as CPU_BACKLOG by the kernel)
    "socket_rcvbuf",  # socket receive buffer full (SOCKET_RCVBUFF)
    "no_socket",  # no listener: UdpNoPorts / TCP reset (NO_SOCKET)
    "xdp_drop",  # the XDP program returned XDP_DROP (SKB_DROP_REASON has none: no skb)
    "xdp_aborted",  # XDP_ABORTED, or a cpumap redirect whose key has no entry (fallback 0)
    "cpumap_full",  # bq_flush_to_queue: the entry's ptr_ring slot was not empty
    "xsk_rx_ring_full",  # AF_XDP RX ring full (XDP_STATISTICS rx_ring_full)
    "xsk_fill_empty",  # no UMEM frame on the FILL ring (rx_fill_ring_empty_descs)
    "socket_backlog",  # tcp_add_backlog: owned socket's backlog over its limit (TCPBacklogDrop)
)
N_DROP_SLOTS = 16  # room for later mechanisms (XDP, cpumap, AF_XDP)
(
    DROP_RING_FULL,
    DROP_NIC_OVERRUN,
    DROP_BACKLOG,
    DROP_FLOW_LIMIT,
    DROP_SOCKET_RCVBUF,
    DROP_NO_SOCKET,
    DROP_XDP_DROP,
    DROP_XDP_ABORTED,
    DROP_CPUMAP_FULL,
    DROP_XSK_RX_FULL,
    DROP_XSK_FILL_EMPTY,
    DROP_SOCKET_BACKLOG,
) = range(len(DROP_REASONS))
