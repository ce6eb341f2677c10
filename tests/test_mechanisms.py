"""Each mechanism's declaration (rxlab/mechanisms/) against what it names: the scenario
fields, the kernel-version flags, the output schema, the code that charges its stages,
counts its drops and posts its events, and docs/model.md's mechanism map."""

import dataclasses
import json
import re
from pathlib import Path
from typing import get_args, get_origin

import numpy as np
import pytest

import rxlab
from rxlab.kernel.versions import KernelBehaviour
from rxlab.mechanisms import DROPS, EVENTS, MECHANISMS, STAGES
from rxlab.scenario import Scenario

ROOT = Path(rxlab.__file__).parent
DOCS = ROOT.parent / "docs"
IDS = [m.name for m in MECHANISMS]


def _code_outside_declarations() -> str:
    """rxlab's source but the declarations and the modules that index them."""
    skip = {"kernel/stages.py", "kernel/drop_reasons.py", "kernel/events.py"}
    return "\n".join(p.read_text() for p in sorted(ROOT.rglob("*.py"))
                     if "mechanisms" not in p.parts
                     and str(p.relative_to(ROOT)) not in skip)


SOURCE = _code_outside_declarations()


def _model_of(annotation):
    """The pydantic model inside a field's annotation (Optional, list, union), if any."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _resolves(path: str) -> bool:
    """'apps[].rcvbuf' names a field of the Scenario model."""
    model = Scenario
    parts = path.split(".")
    for i, part in enumerate(parts):
        name = part.removesuffix("[]")
        if model is None or name not in model.model_fields:
            return False
        ann = model.model_fields[name].annotation
        if part.endswith("[]") != (get_origin(ann) is list and i < len(parts) - 1):
            return False  # a list's items are named with [], and only a list's
        model = _model_of(ann) if i < len(parts) - 1 else None
    return True


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_knobs_are_scenario_fields(mech):
    bad = [k for k in (*mech.knobs, *([mech.sized_by] if mech.arrays else ()))
           if not _resolves(k)]
    assert not bad, f"{mech.name}: not a scenario field: {bad}"


def test_knob_resolver_refuses_what_is_not_there():
    assert _resolves("apps[].rcvbuf") and _resolves("nic.arfs") and _resolves("kernel.rps_cpus")
    assert not _resolves("apps.rcvbuf")  # a list is named with []
    assert not _resolves("nic.rcvbuf") and not _resolves("kernel.busy_poll_usecs")


def test_every_version_flag_belongs_to_one_mechanism():
    flags = {f.name for f in dataclasses.fields(KernelBehaviour)} - {"version"}
    owners: dict[str, list[str]] = {}
    for m in MECHANISMS:
        for f in m.flags:
            owners.setdefault(f, []).append(m.name)
    assert set(owners) <= flags, f"declared flags that versions.py lacks: {set(owners) - flags}"
    assert flags <= set(owners), f"flags no mechanism declares: {flags - set(owners)}"
    assert all(len(v) == 1 for v in owners.values()), owners


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_flags_are_read_by_code(mech):
    for f in mech.flags:
        assert re.search(rf"\b{f}\b", SOURCE), f"{mech.name}: flag {f} is read nowhere"


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_output_blocks_are_in_the_result_schema(mech):
    schema = json.loads((ROOT / "schemas" / "result.schema.json").read_text())
    missing = set(mech.output) - set(schema["properties"])
    assert not missing, f"{mech.name}: output {missing} is not a result key"


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_code_exists_and_is_in_the_model_map(mech):
    model_md = (DOCS / "model.md").read_text()
    table = model_md[model_md.index("## Mechanism map"):model_md.index("## Driver RX polls")]
    for mod in mech.code:
        assert (ROOT / mod).is_file(), f"{mech.name}: {mod} does not exist"
        assert f"`{mod}" in table, f"{mech.name}: {mod} has no row in docs/model.md's map"


def test_names_are_unique():
    for kind, items in (("stage", STAGES), ("drop", DROPS), ("event", EVENTS),
                        ("mechanism", MECHANISMS)):
        names = [it.name for it in items]
        assert len(names) == len(set(names)), f"a {kind} declared twice: {names}"


def test_every_stage_is_charged_and_cited():
    for st in STAGES:
        const = "C_" + st.name.upper()
        used = re.search(rf"\b{const}\b", SOURCE) or f'"{st.name}"' in SOURCE
        assert used, f"stage {st.name}: nothing charges it"
        assert re.search(r"[a-z_]+\(?", st.kernel) and len(st.kernel) > 20, st.name


def test_every_drop_reason_is_counted():
    from rxlab.kernel import drop_reasons

    consts = {v: n for n, v in vars(drop_reasons).items()
              if n.startswith("DROP_") and isinstance(v, int)}
    for i, d in enumerate(DROPS):
        name = consts.get(i)
        assert name, f"drop {d.name}: no DROP_ constant"
        assert re.search(rf"\b{name}\b", SOURCE), f"drop {d.name}: nothing counts it"


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.counters], ids=lambda m: m.name)
def test_counters_are_one_int64_struct(mech):
    dt = mech.counter_dtype
    assert dt.names == tuple(c.name for c in mech.counters)
    assert all(dt.fields[n][0] == np.int64 for n in dt.names)
    for c in mech.counters:  # each one is added to somewhere in compiled code
        assert re.search(rf"\.{c.name} \+=", SOURCE), f"{mech.name}: {c.name} never counted"


def test_every_profile_gives_every_declared_stage():
    import yaml

    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        stages = yaml.safe_load(path.read_text())["stages"]
        assert set(stages) == {st.name for st in STAGES}, path.name

