"""JSON output that is always valid JSON: no NaN or Infinity, ever.

Python's ``json.dumps`` writes a non-finite float as the bare word ``NaN`` or
``Infinity``, which no JSON parser accepts. Input validation keeps such values out of
scenarios, so one in a result is a bug in the model: ``dumps`` then fails loudly (an
internal error naming the value's path, exit status 3) instead of printing invalid JSON.
"""

from __future__ import annotations

import json
import math

from rxlab.errors import ConservationError


def _non_finite(obj, path: str = "") -> str | None:
    if isinstance(obj, float) and not math.isfinite(obj):
        return f"{path or 'the value'} is {obj}"
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    else:
        return None
    for k, v in items:
        found = _non_finite(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


def dumps(obj, what: str = "output", **kw) -> str:
    """``json.dumps(obj, allow_nan=False, **kw)``; a NaN or infinity raises
    ``ConservationError`` (rxlab broke an invariant) naming where it is in ``what``."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError as err:
        where = _non_finite(obj)
        if where is None:
            raise
        raise ConservationError(
            f"{what} {where}: a number that is not finite (a bug in rxlab; nothing was "
            "written)") from err
