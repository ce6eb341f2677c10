"""Socket busy polling: SO_BUSY_POLL / net.core.busy_read, SO_PREFER_BUSY_POLL and
SO_BUSY_POLL_BUDGET (the busy-polling application's loop)."""

from rxlab.mechanisms.base import Event, Mechanism

BUSY_POLL = Mechanism(
    name="busy_poll",
    kernel="sk_busy_loop, sk_mark_napi_id (include/net/busy_poll.h), __napi_busy_loop, "
           "busy_poll_stop, __napi_poll's preferred-busy-poll exit (net/core/dev.c), "
           "__skb_recv_udp (net/ipv4/udp.c), tcp_recvmsg (net/ipv4/tcp.c); the loop taking "
           "the NAPI 217f69743681 (v4.10), preferred busy polling 7fd3253a7de6 (v5.11); "
           "Documentation/networking/napi.rst",
    code=("kernel/busy_poll.py", "kernel/napi_busy_loop.py"),
    events=(Event("BUSY_POLL", "arg thread: its busy loop's sk_busy_loop_timeout passes; "
                               "arg -1 - thread: its spinning loop has something to poll"),),
    flags=("busy_poll", "prefer_busy_poll"),
    knobs=("kernel.busy_read", "apps[].busy_poll", "apps[].prefer_busy_poll",
           "apps[].busy_poll_budget"),
    output=("apps", "queues"),
)
