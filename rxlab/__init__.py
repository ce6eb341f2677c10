"""rxlab: a laboratory for Linux receive-side packet steering.

Public API: ``simulate``, ``load_scenario``, ``Result``, ``UsageError``.
"""

from rxlab import _cache

_cache.configure()

from rxlab.errors import UsageError  # noqa: E402
from rxlab.metrics.result import Result  # noqa: E402
from rxlab.scenario import load_scenario  # noqa: E402
from rxlab.simulate import simulate  # noqa: E402

__all__ = ["simulate", "load_scenario", "Result", "UsageError"]
__version__ = "0.1.0"
