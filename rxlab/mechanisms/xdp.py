"""The XDP program in the driver's poll and its verdicts."""

from rxlab.mechanisms.base import Drop, Mechanism, Stage

XDP = Mechanism(
    name="xdp",
    kernel="bpf_prog_run_xdp (include/net/xdp.h), xdp_do_redirect, bpf_redirect_map "
           "(net/core/filter.c), the drivers' XDP_TX",
    code=("xdp/program.py", "xdp/rules.py"),
    stages=(
        Stage("xdp_prog", "bpf_prog_run_xdp: the program's run", per_packet=True),
        Stage("xdp_drop", "XDP_DROP: the driver recycles the page", per_packet=True),
        Stage("xdp_tx", "XDP_TX: the driver's xmit on its XDP TX ring (ice_xmit_xdp_ring)",
              per_packet=True),
        Stage("xdp_rx_hash", "the program reads the RSS hash (bpf_xdp_metadata_rx_hash, "
                             "net/core/xdp.c)"),
        Stage("xdp_flow_hash", "the program hashes the flow's headers itself"),
    ),
    drops=(
        Drop("xdp_drop", "the XDP program returned XDP_DROP (no skb, so no drop reason)"),
        Drop("xdp_aborted", "XDP_ABORTED, or a cpumap redirect whose key has no entry"),
    ),
    knobs=("xdp",),
    output=("xdp",),
)
