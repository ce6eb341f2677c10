"""Built-in reproductions of the seeds' experiments (``rxlab reproduce NAME``)."""

from rxlab.repro import flow_limit, rss_rxhash

EXPERIMENTS = {m.NAME: m for m in (rss_rxhash, flow_limit)}
