"""The output schema (rxlab/metrics/schema.py): every built-in scenario's --json and each
mechanism's section validate against it, a result it does not describe fails, and the
shipped JSON Schema files and docs/output.md are generated from it (current)."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rxlab.cli.main import main
from rxlab.metrics.schema import SCHEMAS, RunResult, json_schema, validate_run

ROOT = Path(__file__).resolve().parent.parent


def run_json(capsys, *args) -> dict:
    assert main(["run", *args, "--duration", "0.002", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def default_result():
    from rxlab.simulate import simulate

    return json.loads(simulate("default", duration=0.002).to_json())


@pytest.mark.parametrize("args", [
    ["default"], ["cpumap"], [str(ROOT / "examples" / "memcached-16cpu.yaml")],
    ["default", "--set", "nic.threaded=true"],
    ["default", "--set", "kernel.rps_cpus=f", "--set", "kernel.thread_backlog_napi=true"],
    ["default", "--set", "kernel.rps_cpus=f", "--set", "kernel.rps_flow_cnt=256",
     "--set", "kernel.rps_sock_flow_entries=1024",
     "--set", "nic.arfs={model: ice-hash-match}"],
    ["default", "--set", "host.kernel=4.9"],
    ["default", "--set", "traffic.groups.0.proto=tcp"],
], ids=["default", "cpumap", "memcached", "threaded", "backlog-threads", "arfs", "4.9", "tcp"])
def test_every_built_in_scenario_and_section_validates(capsys, args):
    data = run_json(capsys, *args)
    res = validate_run(data)
    # the sections a mechanism adds are there when it is used, and described
    if args[0] == "cpumap":
        assert res.xdp is not None and res.cpumap and res.config.cpumap is not None
    if "nic.threaded=true" in args:
        assert all(q.napi_thread_cpu is not None for q in res.queues)
    if "traffic.groups.0.proto=tcp" in args:
        assert res.tcp is not None and res.tcp.local + res.tcp.remote > 0
    if any("arfs" in a for a in args):
        assert res.config.arfs == "ice-hash-match"


def test_a_replayed_capture_validates(capsys, tmp_path):
    from test_readme_tour import _pcap

    _pcap(tmp_path / "c.pcap")
    res = validate_run(run_json(capsys, "default", "--pcap", str(tmp_path / "c.pcap")))
    assert res.capture is not None and res.capture.packets == 2


@pytest.mark.parametrize("change", ["extra", "missing", "type", "negative"])
def test_a_result_the_schema_does_not_describe_fails(default_result, change):
    bad = copy.deepcopy(default_result)
    if change == "extra":
        bad["packets"]["dropped_mysteriously"] = 0
    elif change == "missing":
        del bad["cpus"][0]["util"]["softirq"]
    elif change == "type":
        bad["seed"] = "one"
    else:
        bad["packets"]["dropped_by_reason"]["backlog"] = -1
    with pytest.raises(ValidationError):
        validate_run(bad)
    validate_run(default_result)


def test_every_field_is_described():
    for name in SCHEMAS:
        s = json_schema(name)
        for part, d in [(name, s), *s.get("$defs", {}).items()]:
            missing = [k for k, p in d.get("properties", {}).items() if not p.get("description")]
            assert not missing, f"{part}: fields without a meaning: {missing}"


def test_shipped_schema_files_and_docs_are_current():
    spec = importlib.util.spec_from_file_location("schemas", ROOT / "scripts" / "schemas.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    stale = [str(p.relative_to(ROOT)) for p, text in mod.files().items()
             if not p.exists() or p.read_text() != text]
    assert not stale, f"{stale}: run scripts/schemas.py"
    shipped = ROOT / "rxlab" / "schemas" / "result.schema.json"
    assert json.loads(shipped.read_text())["title"] == RunResult.__name__


def test_the_afxdp_reproduction_validates(capsys):
    """The four rx-engine reproductions are validated by tests/test_repro.py's runs."""
    from rxlab.metrics.schema import validate_reproduction

    assert main(["reproduce", "afxdp-tx-clean", "--quick", "--seeds", "2", "--json"]) == 0
    rep = validate_reproduction(json.loads(capsys.readouterr().out))
    assert rep.experiment == "afxdp-tx-clean" and rep.claims
