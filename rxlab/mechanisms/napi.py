"""NAPI and the NET_RX softirq: net_rx_action, __napi_poll, the driver's poll, ksoftirqd."""

from rxlab.mechanisms.base import Mechanism, Stage

NAPI = Mechanism(
    name="napi",
    kernel="net_rx_action, __napi_poll, napi_complete_done (net/core/dev.c); "
           "handle_softirqs, ksoftirqd (kernel/softirq.c); the drivers' polls",
    code=("kernel/napi.py", "kernel/rx_loop.py"),
    stages=(
        Stage("napi_poll", "__napi_poll (net/core/dev.c): the indirect call into the "
                           "driver's poll and the NAPI state"),
        Stage("driver_rx", "the driver's per-descriptor receive (ice_clean_rx_irq, "
                           "drivers/net/ethernet/intel/ice/ice_txrx.c): buffer, skb, "
                           "eth_type_trans", per_packet=True),
        Stage("gro", "napi_gro_receive -> dev_gro_receive (net/core/gro.c) for a packet "
                     "it does not merge", per_packet=True),
    ),
    flags=("ksoftirqd_defers", "softnet_columns"),
    knobs=("kernel.netdev_budget", "kernel.netdev_budget_usecs", "nic.napi_weight",
           "host.hz"),
    output=("softnet_stat", "cpus"),
)
