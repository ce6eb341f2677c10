"""Built-in reproductions of the seeds' experiments (``rxlab reproduce NAME``)."""

from rxlab.repro import afxdp_tx_clean, arfs_flow_match, cpumap, flow_limit, rss_rxhash

EXPERIMENTS = {m.NAME: m for m in (rss_rxhash, flow_limit, arfs_flow_match, cpumap,
                                      afxdp_tx_clean)}
