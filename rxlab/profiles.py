"""Cost profiles: named YAML files of per-stage CPU costs, each with its source."""

from __future__ import annotations

from pathlib import Path

import yaml

from rxlab.errors import UsageError
from rxlab.kernel.state import STAGES

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
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: malformed YAML ({err})") from None
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise UsageError(f"{path}: a cost profile needs a 'stages' mapping")
    for name, entry in stages.items():
        if name not in STAGES:
            raise UsageError(f"{path}: stages.{name}: unknown stage; known: {', '.join(STAGES)}")
        if not isinstance(entry, dict) or "ns" not in entry or "source" not in entry:
            raise UsageError(f"{path}: stages.{name}: give 'ns' and 'source' (its citation)")
        if not isinstance(entry["ns"], (int, float)) or entry["ns"] < 0:
            raise UsageError(f"{path}: stages.{name}.ns: must be a number >= 0")
    missing = [s for s in STAGES if s not in stages]
    if missing:
        raise UsageError(f"{path}: stages missing: {', '.join(missing)}")
    return {"name": data.get("name", path.stem), "stages": stages}


def stage_costs(ref: str, overrides: dict[str, float]) -> dict[str, float]:
    prof = load_profile(ref)
    out = {k: float(v["ns"]) for k, v in prof["stages"].items()}
    for k, v in overrides.items():
        if k not in STAGES:
            raise UsageError(f"host.costs.{k}: unknown stage; known: {', '.join(STAGES)}")
        out[k] = float(v)
    return out
