"""``rxlab calibrate``: this host's own per-stage costs, measured in network namespaces.

The lab of ``rxlab kernel-check`` under other names (``rxcal_tx``/``rxcal_rx``): a
4-queue veth pair, the sender pinned to CPU 0 (``veth_xmit -> __netif_rx``), RPS sending
every packet to CPU 1 (``get_rps_cpu -> enqueue_to_backlog -> process_backlog``), the
receiving process on CPU 0, so CPU 1 does nothing but the receive softirq. UDP at the
sender's full rate and at paced loads; per run the NET_RX softirq time of each CPU
(tracepoints), the deltas of /proc/stat and /proc/net/softnet_stat and the processes'
own CPU time; repeated, and least-squares fits with standard errors (``fit``). The
result is a cost profile for ``host.cost_profile`` (``profile``).

    from rxlab.calibrate.runner import calibrate
    prof = calibrate(quick=True)       # rxlab.host.guard.CannotRun when it cannot run here
"""
