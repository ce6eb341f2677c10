"""XDP_REDIRECT into an AF_XDP socket (``xsk_rcv``, ``net/xdp/xsk.c``; reference 10.4).

The frame goes to the socket in ``XSKMAP[rx_queue_index]``: zero-copy hands the UMEM
frame over, copy mode copies the packet into a frame taken from the FILL ring. It lands
in the socket's RX ring, read by the application thread without a system call per
packet. The RX ring and the frames the application keeps on the FILL ring bound what
can wait: rxlab models the socket's queue as min(rx ring, FILL ring, UMEM frames)
entries and names the drop after the smaller bound (simplification: the application
returns every frame to the FILL ring as soon as it has read it; the full ring protocol,
with cached indices and the ixgbe TX-completion bug, is ``rxlab.xdp.xsk``).
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.accounting import cost, drop
from rxlab.kernel.socket import sock_queue_tail
from rxlab.kernel.state import (
    C_XSK_COPY,
    C_XSK_ZC,
    DROP_XSK_FILL_EMPTY,
    DROP_XSK_RX_FULL,
    PS_SOCK_CAP,
    PS_SOCK_FILL_BOUND,
    PS_SOCK_XSK_COPY,
    ST_SO_DROPS,
    ST_SO_HEAD,
    ST_SO_TAIL,
)


@njit(**JIT_STATE)
def xsk_rcv(s, sk, f, tarr, seq, length, t):
    p, so = s.p, s.so
    if so.thread[sk, ST_SO_TAIL] - so.thread[sk, ST_SO_HEAD] >= p.sock_i[sk, PS_SOCK_CAP]:
        so.thread[sk, ST_SO_DROPS] += 1
        drop(s, DROP_XSK_FILL_EMPTY if p.sock_i[sk, PS_SOCK_FILL_BOUND] else DROP_XSK_RX_FULL, t)
        return t
    t += cost(s, C_XSK_COPY if p.sock_i[sk, PS_SOCK_XSK_COPY] else C_XSK_ZC)
    return sock_queue_tail(s, sk, f, tarr, seq, length, t)
