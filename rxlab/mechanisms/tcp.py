"""TCP receive: the established socket, its backlog while owned, the out-of-order queue."""

from rxlab.mechanisms.base import Drop, Mechanism, Stage

TCP = Mechanism(
    name="tcp",
    kernel="tcp_v4_rcv, tcp_add_backlog (net/ipv4/tcp_ipv4.c), tcp_rcv_established, "
           "tcp_data_queue, tcp_data_queue_ofo (net/ipv4/tcp_input.c), __release_sock "
           "(net/core/sock.c)",
    code=("kernel/socket.py",),
    stages=(
        Stage("tcp_rcv", "tcp_v4_rcv -> tcp_rcv_established -> tcp_data_queue for an "
                         "in-order segment", per_packet=True),
        Stage("tcp_remote", "tcp_rcv_established on a CPU other than the reader's: the "
                            "socket's lines are dirty in the reader's cache",
              per_packet=True),
        Stage("tcp_ofo", "tcp_data_queue_ofo (net/ipv4/tcp_input.c): the out-of-order "
                         "queue's insert", per_packet=True),
    ),
    drops=(Drop("socket_backlog", "tcp_add_backlog: the owned socket's backlog was over "
                                  "its limit (TCPBacklogDrop)"),),
    output=("tcp",),
)
