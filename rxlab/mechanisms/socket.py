"""UDP sockets and their readers: the stack up to the socket, the queue, recv()."""

from rxlab.mechanisms.base import Drop, Mechanism, Stage

SOCKET = Mechanism(
    name="socket",
    kernel="__netif_receive_skb_core (net/core/dev.c), ip_rcv (net/ipv4/ip_input.c), "
           "udp_rcv, __udp_enqueue_schedule_skb, udp_recvmsg, __skb_recv_udp "
           "(net/ipv4/udp.c)",
    code=("kernel/socket.py",),
    stages=(
        Stage("stack_rx", "__netif_receive_skb_core .. ip_rcv .. udp_rcv: the stack up to "
                          "the socket lookup", per_packet=True),
        Stage("socket_enqueue", "__udp_enqueue_schedule_skb (net/ipv4/udp.c): charge the "
                                "socket, queue, sk_data_ready", per_packet=True),
        Stage("recvmsg", "udp_recvmsg (net/ipv4/udp.c): a read's system time per datagram",
              per_packet=True),
        Stage("cross_cpu_miss", "the reader's copy of lines another CPU wrote "
                                "(skb_copy_datagram_iter): cache misses"),
    ),
    drops=(
        Drop("socket_rcvbuf", "the socket's receive buffer was full "
                              "(SKB_DROP_REASON_SOCKET_RCVBUFF, UDP RcvbufErrors)"),
        Drop("no_socket", "no listener (SKB_DROP_REASON_NO_SOCKET: UdpNoPorts, a TCP "
                          "reset)"),
    ),
    knobs=("apps[].rcvbuf", "apps[].batch", "apps[].cost", "apps[].groups"),
    output=("apps", "latency_ns", "reordered_packets"),
)
