"""AF_XDP receive: XDP_REDIRECT into an XSKMAP socket's RX ring."""

from rxlab.mechanisms.base import Drop, Mechanism, Stage

XSK = Mechanism(
    name="xsk",
    kernel="xsk_rcv, xsk_rcv_zc, __xsk_rcv (net/xdp/xsk.c), __xsk_map_redirect "
           "(net/xdp/xskmap.c)",
    code=("xdp/xsk_rx.py",),
    stages=(
        Stage("xsk_zc", "xsk_rcv_zc: the descriptor onto the RX ring (zero-copy)",
              per_packet=True),
        Stage("xsk_copy", "__xsk_rcv: the copy into a FILL-ring frame (copy mode)",
              per_packet=True),
    ),
    drops=(
        Drop("xsk_rx_ring_full", "the AF_XDP RX ring was full (XDP_STATISTICS "
                                 "rx_ring_full)"),
        Drop("xsk_fill_empty", "no UMEM frame on the FILL ring (rx_fill_ring_empty_descs)"),
    ),
    knobs=("apps[].afxdp",),
    output=("apps",),
)
