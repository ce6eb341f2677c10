"""Bad input gives ``UsageError`` with a one-line message that names the field.

Each case goes through the entry point a user would hit: ``load_scenario`` for files,
``scenario_from_dict`` for the schema, and ``build`` for checks that need the whole
scenario (the kernel's power-of-two rule, CPU masks against host.cpus, the RSS key,
cost profiles).
"""

from __future__ import annotations

import copy

import pytest

from rxlab.build import build
from rxlab.errors import UsageError
from rxlab.scenario import load_scenario, scenario_from_dict


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture(scope="module")
def base(scenario_dict, udp_group):
    return scenario_dict([udp_group("g", 10, 1000)], host={"cpus": 2})


def compile_dict(d: dict):
    """Validate and compile, as ``simulate`` does before running."""
    return build(scenario_from_dict(d))


def assert_usage_error(fn, *needles: str) -> str:
    with pytest.raises(UsageError) as ei:
        fn()
    msg = str(ei.value)
    assert msg and "\n" not in msg, msg  # one line
    for n in needles:
        assert n in msg, (n, msg)
    return msg


def test_base_scenario_is_valid(base):
    compile_dict(base)  # the cases below each break exactly one thing


# ----------------------------------------------------------------- files ----------
def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    assert_usage_error(lambda: load_scenario(str(path)), str(path), "no such")


def test_malformed_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nhost: {cpus: 2\nnic: [\n")
    msg = assert_usage_error(lambda: load_scenario(str(path)), str(path), "YAML")
    assert "line" in msg


def test_yaml_top_level_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    assert_usage_error(lambda: load_scenario(str(path)), str(path), "mapping")


def test_unknown_key_in_a_file_names_file_and_field(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(
        "host: {cpus: 2, cpuz: 4}\n"
        "traffic:\n  groups:\n"
        "    - {name: g, flows: 1, src: {addr: 10.0.0.2}, dst: {addr: 10.0.0.1},\n"
        "       dport: {value: 1}, rate: {pps: 1000}}\n"
    )
    assert_usage_error(lambda: load_scenario(str(path)), str(path), "host.cpuz", "unknown key")


# ----------------------------------------------------------------- schema / build --
def _group_pps(pps):
    return lambda b: _merge(b, {"traffic": {"groups": [dict(b["traffic"]["groups"][0],
                                                             rate={"pps": pps})]}})


CASES = [
    # (id, how to break the base scenario, text the message must contain)
    ("unknown_key", lambda b: _merge(b, {"host": {"cpuz": 2}}), ["host.cpuz", "unknown key"]),
    ("unknown_nested_key", lambda b: _merge(b, {"nic": {"rss": {"hfunk": "xor"}}}),
     ["nic.rss.hfunk"]),
    ("negative_rate", _group_pps(-5), ["traffic.groups[0].rate.pps"]),
    ("zero_rate", _group_pps(0), ["traffic.groups[0].rate.pps"]),
    ("zero_cpus", lambda b: _merge(b, {"host": {"cpus": 0}, "apps": []}), ["host.cpus"]),
    ("irq_on_missing_cpu", lambda b: _merge(b, {"nic": {"irq_affinity": [5]}}),
     ["nic.irq_affinity", "5"]),
    ("unknown_cost_profile", lambda b: _merge(b, {"host": {"cost_profile": "nope"}}),
     ["host.cost_profile", "nope"]),
    ("unknown_cost_stage", lambda b: _merge(b, {"host": {"costs": {"bogus": 1}}}),
     ["host.costs.bogus"]),
    ("negative_cost", lambda b: _merge(b, {"host": {"costs": {"stack_rx": -1}}}),
     ["host.costs", "stack_rx"]),
    ("flow_limit_table_len_not_pow2",
     lambda b: _merge(b, {"kernel": {"flow_limit_table_len": 1000}}),
     ["kernel.flow_limit_table_len", "1000", "power of two"]),
    ("rps_cpus_missing_cpu", lambda b: _merge(b, {"kernel": {"rps_cpus": "10"}}),
     ["kernel.rps_cpus", "CPU 4"]),
    ("rps_cpus_not_hex", lambda b: _merge(b, {"kernel": {"rps_cpus": "xyz"}}),
     ["kernel.rps_cpus"]),
    ("flow_limit_bitmap_missing_cpu",
     lambda b: _merge(b, {"kernel": {"flow_limit_cpu_bitmap": "4"}}),
     ["kernel.flow_limit_cpu_bitmap", "CPU 2"]),
    ("app_on_missing_cpu", lambda b: _merge(b, {"apps": [{"name": "x", "cpus": 7}]}),
     ["apps[0].cpus", "CPU 7"]),
    ("app_cpu_range_past_end", lambda b: _merge(b, {"apps": [{"name": "x", "cpus": "0-3"}]}),
     ["apps[0].cpus", "CPU 2"]),
    ("bad_kernel_version", lambda b: _merge(b, {"host": {"kernel": "banana"}}),
     ["host.kernel"]),
    ("rss_key_not_hex", lambda b: _merge(b, {"nic": {"rss": {"key": "zz" * 40}}}),
     ["nic.rss.key"]),
    ("rss_key_too_short", lambda b: _merge(b, {"nic": {"rss": {"key": "6d:5a"}}}),
     ["nic.rss.key"]),
]


@pytest.mark.parametrize(
    "name, breaker, needles",
    [c if hasattr(c, "marks") else pytest.param(*c, id=c[0]) for c in CASES],
)
def test_bad_input_is_a_one_line_usage_error(base, name, breaker, needles):
    bad = breaker(base)
    assert_usage_error(lambda: compile_dict(bad), *needles)


def test_top_level_not_a_mapping():
    assert_usage_error(lambda: scenario_from_dict([1, 2]), "top level")


def test_missing_traffic_section():
    assert_usage_error(lambda: scenario_from_dict({"name": "x"}), "traffic", "missing")
