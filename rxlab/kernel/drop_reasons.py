"""Why a packet was dropped: one drop path (``accounting.drop``), one reason each.

Names follow the kernel's ``enum skb_drop_reason`` (include/net/dropreason-core.h) where
one exists; ``DROP_<NAME>`` is a reason's index into the drop counters.
"""

# name -> what the kernel calls it and which counter shows it (the output's meaning)
DROP_REASON_DOC = {
    "ring_full": "the NIC's rx ring had no free descriptor (ethtool -S rx_missed / "
                 "rx_no_buffer)",
    "nic_overrun": "the NIC's packet-rate ceiling was exceeded (rx_fifo_errors)",
    "backlog": "enqueue_to_backlog: qlen > netdev_max_backlog (SKB_DROP_REASON_CPU_BACKLOG, "
               "softnet_stat dropped)",
    "flow_limit": "skb_flow_limit said drop (the kernel counts it as CPU_BACKLOG, and in "
                  "softnet_stat flow_limit_count)",
    "socket_rcvbuf": "the socket's receive buffer was full (SKB_DROP_REASON_SOCKET_RCVBUFF, "
                     "UDP RcvbufErrors)",
    "no_socket": "no listener (SKB_DROP_REASON_NO_SOCKET: UdpNoPorts, a TCP reset)",
    "xdp_drop": "the XDP program returned XDP_DROP (no skb, so no drop reason)",
    "xdp_aborted": "XDP_ABORTED, or a cpumap redirect whose key has no entry",
    "cpumap_full": "bq_flush_to_queue: the entry's ptr_ring slot was not empty",
    "xsk_rx_ring_full": "the AF_XDP RX ring was full (XDP_STATISTICS rx_ring_full)",
    "xsk_fill_empty": "no UMEM frame on the FILL ring (rx_fill_ring_empty_descs)",
    "socket_backlog": "tcp_add_backlog: the owned socket's backlog was over its limit "
                      "(TCPBacklogDrop)",
}
DROP_REASONS = tuple(DROP_REASON_DOC)
N_DROP_SLOTS = len(DROP_REASONS)  # a column per reason (Stats.cnt, ts_drop)
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
