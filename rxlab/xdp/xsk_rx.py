"""XDP_REDIRECT into an AF_XDP socket (``xsk_rcv``, ``net/xdp/xsk.c``).

The frame goes to the socket in ``XSKMAP[rx_queue_index]``: zero-copy hands the UMEM
frame over, copy mode copies the packet into a frame taken from the FILL ring. It lands
in the socket's RX ring, read by the application thread without a system call per
packet. The RX ring and the frames the application keeps on the FILL ring bound what
can wait: rxlab models the socket's queue as min(rx ring, FILL ring, UMEM frames)
entries and names the drop after the smaller bound (simplification: the application
returns every frame to the FILL ring as soon as it has read it; the full ring protocol,
with cached indices and the ixgbe TX-completion bug, is ``rxlab.afxdp.xsk``).
"""

from numba import njit

from rxlab.config import JIT_STATE
from rxlab.kernel.accounting import cost, drop
from rxlab.kernel.drop_reasons import DROP_XSK_FILL_EMPTY, DROP_XSK_RX_FULL
from rxlab.kernel.socket import sock_queue_tail
from rxlab.kernel.stages import C_XSK_COPY, C_XSK_ZC


@njit(**JIT_STATE)
def xsk_rcv(s, c, sk, f, tarr, seq, length, t):
    so = s.so
    if so.sock[sk].so_tail - so.sock[sk].so_head >= so.sock[sk].sock_cap:
        so.sock[sk].so_drops += 1
        drop(s, DROP_XSK_FILL_EMPTY if so.sock[sk].sock_fill_bound else DROP_XSK_RX_FULL, t)
        return t
    t += cost(s, C_XSK_COPY if so.sock[sk].sock_xsk_copy else C_XSK_ZC)
    return sock_queue_tail(s, c, sk, f, tarr, seq, length, t)
