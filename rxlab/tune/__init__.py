"""Host tuning: recommend RSS tables, RFS sizes and flow-limit settings, proved by
simulation (``rxlab tune``), and predictable RSS (``rxlab hash --to-queue``)."""

from rxlab.tune.recommend import OBJECTIVES, scenario_yaml, tune

__all__ = ["tune", "scenario_yaml", "OBJECTIVES"]
