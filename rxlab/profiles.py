"""Cost profiles: named YAML files of per-stage CPU costs, each with its source."""

from __future__ import annotations

import math
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.inputs import parse_yaml, read_text
from rxlab.kernel.stages import STAGES

MAX_COST_NS = 1e9  # one stage costs at most 1 s of CPU per unit (as host.costs)

PROFILE_DIR = Path(__file__).parent / "profiles"


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(ref: str) -> dict:
    """A built-in profile name or a YAML path -> {"name", "stages": {stage: {ns, source}}}."""
    path = Path(ref)
    if not path.exists():
        path = PROFILE_DIR / f"{ref}.yaml"
    if not path.exists():
        raise UsageError(
            f"host.cost_profile: no profile {ref!r}; built-in: {', '.join(profile_names())}"
        )
    try:  # a size limit, UTF-8 only, no devices (host.cost_profile=/dev/zero)
        data = parse_yaml(read_text(path, "cost profile"), str(path))
    except UsageError as err:
        raise UsageError(f"host.cost_profile: {err}") from None
    where = f"host.cost_profile: {path}"
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise UsageError(f"{where}: a cost profile needs a 'stages' mapping")
    for name, entry in stages.items():
        if name not in STAGES:
            raise UsageError(f"{where}: stages.{name!r}: unknown stage; known: "
                             f"{', '.join(STAGES)}")
        if not isinstance(entry, dict) or "ns" not in entry or "source" not in entry:
            raise UsageError(f"{where}: stages.{name}: give 'ns' and 'source' (its citation)")
        ns = entry["ns"]
        if (isinstance(ns, bool) or not isinstance(ns, (int, float)) or not math.isfinite(ns)
                or not 0 <= ns <= MAX_COST_NS):
            raise UsageError(f"{where}: stages.{name}.ns: {ns!r} is not a cost; give "
                             f"ns from 0 to {MAX_COST_NS:g} (1 s)")
    missing = [s for s in STAGES if s not in stages]
    if missing:
        raise UsageError(f"{where}: stages missing: {', '.join(missing)}")
    return {"name": data.get("name", path.stem), "stages": stages}


def stage_costs(ref: str, overrides: dict[str, float]) -> dict[str, float]:
    prof = load_profile(ref)
    out = {k: float(v["ns"]) for k, v in prof["stages"].items()}
    for k, v in overrides.items():
        if k not in STAGES:
            raise UsageError(f"host.costs.{k}: unknown stage; known: {', '.join(STAGES)}")
        out[k] = float(v)
    return out
