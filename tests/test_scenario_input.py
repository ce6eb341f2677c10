"""Scenario input is checked at the edge and read the kernel's way.

Every bad value is refused before anything is compiled or allocated: exit status 2 and
one line naming the field (through ``rxlab run``, as a user hits it), never a crash, a
hang or a run on values the compiled loop cannot index. Values a user writes as the
kernel writes them are accepted: kernel versions as text whatever YAML makes of them,
sysfs CPU masks, cpulists wherever a CPU set is asked.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rxlab.cli.main import main
from rxlab.cli.run_cmd import parse_sets
from rxlab.cpuset import parse_mask
from rxlab.errors import UsageError
from rxlab.scenario import BUILTIN_DIR, load_scenario, scenario_from_dict, with_overrides

DEFAULT_YAML = (BUILTIN_DIR / "default.yaml").read_text()
RUN = ("run", "default", "--json", "--duration", "0.001")


def cli_error(capsys, *argv: str) -> str:
    """Run the CLI; it must exit 2 with exactly one line on stderr and nothing on stdout."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (code, out[:200], err[:2000])
    assert lines[0].startswith("rxlab: error: ") and "Traceback" not in err
    return lines[0]


def sets(*items: str) -> list[str]:
    return [a for s in items for a in ("--set", s)]


# ------------------------------------------------------------------ --set values
# (the --set items, text the one line must contain); the default scenario has 4 CPUs,
# 4 queues and one app
SET_CASES = [
    # indices the compiled loop would use: RSS tables, rules, contexts
    (["nic.rss.indirection={equal: 9}"], ["nic.rss.indirection", "equal: 9",
                                          "nic.queues = 4", "ethtool"]),
    (["nic.rss.indirection={equal: 5}"], ["nic.rss.indirection", "nic.queues = 4"]),
    (["nic.rss.indirection={equal: 0}"], ["nic.rss.indirection"]),
    (["nic.rss.indirection={weight: [1,1,1,1,1,1,1,1]}"], ["nic.rss.indirection",
                                                           "8 weights", "nic.queues = 4"]),
    (["nic.rss.indirection={weight: [0,0,0,0]}"], ["nic.rss.indirection", "not all 0"]),
    (["nic.rss.indirection=[0,1,2,7]"], ["nic.rss.indirection[3]", "queue 7",
                                         "nic.queues = 4"]),
    (["nic.rss.indirection=[0,1,2,-1]"], ["nic.rss.indirection[3]", "queue -1"]),
    (["nic.rss.contexts=[{id: 1, indirection: [6]}]"],
     ["nic.rss.contexts[0].indirection[0]", "queue 6"]),
    (["nic.rss.contexts=[{id: 1, indirection: {equal: 9}}]"],
     ["nic.rss.contexts[0].indirection", "nic.queues = 4"]),
    (["nic.rss.contexts=[{id: 1}, {id: 1}]"], ["nic.rss.contexts[1].id", "twice"]),
    (["nic.ntuple=[{match: {proto: udp}, context: 3}]"], ["nic.ntuple[0].context",
                                                          "context 3"]),
    (["nic.rss.contexts=[{id: 1, indirection: {equal: 2}}]",
      "nic.ntuple=[{match: {proto: udp}, context: 1, ring_cookie: 3}]"],
     ["nic.ntuple[0].ring_cookie", "queue 4"]),
    (["nic.ntuple=[{match: {proto: udp}, queue: 4}]"], ["nic.ntuple[0].queue", "queue 4"]),
    (["nic.ntuple=[{match: {group: nope}, queue: 1}]"], ["nic.ntuple[0].match.group",
                                                         "nope"]),
    (["nic.rss.table_size=100"], ["nic.rss.table_size", "100", "power of two"]),
    (["xdp={rules: [{match: {rx_queue: 4}, action: drop}]}"],
     ["xdp.rules[0].match.rx_queue", "queue 4"]),
    # CPU sets: present, non-empty, well formed, on existing CPUs
    (["apps.0.cpus=[]"], ["apps[0].cpus", "no CPU"]),
    (["apps.0.cpus=''"], ["apps[0].cpus", "no CPU"]),
    (["apps.0.cpus=3-1"], ["apps[0].cpus", "3-1", "backwards", "1-3"]),
    (["apps.0.cpus=0-x"], ["apps[0].cpus", "0-x"]),
    (["apps.0.cpus=-1"], ["apps[0].cpus"]),
    (["apps.0.cpus=0-4294967295"], ["apps[0].cpus", "NR_CPUS"]),
    (["apps.0.cpus=²"], ["apps[0].cpus"]),
    (["apps.0.cpus=0-7"], ["apps[0].cpus", "CPU 4", "host.cpus = 4"]),
    (["apps.0.migrate={every_s: 0.001, cpus: []}"], ["apps[0].migrate.cpus", "no CPU"]),
    (["apps.0.migrate={every_s: 0.001, cpus: 2-9}"], ["apps[0].migrate.cpus", "CPU 4"]),
    (["xdp={rules: [{action: redirect-cpu, cpus: 0}]}", "cpumap={cpus: []}"],
     ["cpumap.cpus", "no CPU"]),
    (["xdp={rules: [{action: redirect-cpu, cpus: '3-2'}]}", "cpumap={cpus: 1}"],
     ["xdp.rules[0].cpus", "backwards"]),
    (["nic.irq_affinity=[0,1,2,9]"], ["nic.irq_affinity[3]", "CPU 9"]),
    (["nic.irq_affinity=0-7"], ["nic.irq_affinity", "8 entries for 4 queues"]),
    (["kernel.rps_cpus={8: f}"], ["kernel.rps_cpus", "queue 8", "nic.queues = 4"]),
    (["kernel.rps_cpus=f0"], ["kernel.rps_cpus", "CPU 4", "host.cpus = 4"]),
    (["kernel.rps_cpus=10"], ["kernel.rps_cpus", "'10'", "CPU 4"]),  # sysfs hex, not ten
    (["kernel.rps_cpus=zz"], ["kernel.rps_cpus", "not hex", "ff,ffffffff"]),
    (["kernel.rps_cpus=1ffffffff,0"], ["kernel.rps_cpus", "8 hex digits"]),
    (["kernel.flow_limit_cpu_bitmap=10000000000"], ["kernel.flow_limit_cpu_bitmap",
                                                    "CPU 40"]),
    (["kernel.rps_flow_cnt={9: 256}"], ["kernel.rps_flow_cnt", "queue 9"]),
    (["kernel.rps_flow_cnt=1"], ["kernel.rps_flow_cnt", "hash_32"]),
    (["kernel.rps_sock_flow_entries=536870913"], ["kernel.rps_sock_flow_entries"]),
    (["kernel.flow_limit_table_len=1000"], ["kernel.flow_limit_table_len", "power of two"]),
    (["host.cpus=0-15"], ["host.cpus", "count", "write 16"]),
    (["nic.queues=0-7"], ["nic.queues", "count", "write 8"]),
    # numbers: finite, inside the range the kernel or physics allows, the limit named
    (["host.costs={stack_rx: .nan}"], ["host.costs.stack_rx", "finite"]),
    (["host.costs={stack_rx: .inf}"], ["host.costs.stack_rx", "finite"]),
    (["host.costs={stack_rx: 1e300}"], ["host.costs.stack_rx", "1e+09"]),
    (["host.costs={stack_rx: -1}"], ["host.costs.stack_rx"]),
    (["host.costs={bogus: 1}"], ["host.costs.bogus", "unknown stage"]),
    (["host.cost_jitter={dist: lognormal, cv: .inf}"], ["host.cost_jitter.cv", "finite"]),
    (["host.cost_jitter={dist: lognormal, cv: .nan}"], ["host.cost_jitter.cv", "finite"]),
    (["host.cost_jitter={dist: lognormal, cv: 1e6}"], ["host.cost_jitter.cv", "100"]),
    (["apps.0.cost.user_ns=.nan"], ["apps[0].cost.user_ns", "finite"]),
    (["drain=.inf"], ["drain", "finite"]),
    (["drain=1e300"], ["drain", "1e+06"]),
    (["metrics.warmup=.inf"], ["metrics.warmup", "finite"]),
    (["metrics.warmup=1e300"], ["metrics.warmup", "1e+06"]),
    (["metrics.interval=.nan"], ["metrics.interval", "finite"]),
    (["metrics.interval=1e-12"], ["metrics.interval", "1 ns"]),
    (["nic.rx_usecs=.inf"], ["nic.rx_usecs", "finite"]),
    (["nic.rx_usecs=1e300"], ["nic.rx_usecs", "8160", "ICE_ITR_MAX"]),
    (["traffic.groups.0.stop=.inf"], ["traffic.groups[0].stop", "finite"]),
    (["traffic.groups.0.stop=1e300"], ["traffic.groups[0].stop", "1e+06"]),
    (["traffic.groups.0.start=.inf"], ["traffic.groups[0].start", "finite"]),
    (["traffic.groups.0.start=1e300"], ["traffic.groups[0].start", "1e+06"]),
    (["nic.arfs.model=ice-hash-match", "nic.arfs.delay_us=.inf"], ["nic.arfs.delay_us",
                                                                   "finite"]),
    (["nic.arfs.model=ice-hash-match", "nic.arfs.delay_us=1e300"], ["nic.arfs.delay_us",
                                                                    "1e+12"]),
    (["nic.arfs={model: ice-hash-match, period_s: .inf}"], ["nic.arfs.period_s"]),
    (["nic.arfs={model: ice-hash-match, period_s: 1e-6}"], ["nic.arfs.period_s", "jiffy"]),
    (["nic.arfs={model: mlx5, period_s: 1.0}"], ["nic.arfs", "period_s", "mlx5", "remove it"]),
    (["nic.max_pps=1e-300"], ["nic.max_pps", "0.001"]),
    (["nic.max_pps=.nan"], ["nic.max_pps", "finite"]),
    (["nic.link_gbps=1e-300"], ["nic.link_gbps", "0.01"]),
    (["nic.link_gbps=.inf"], ["nic.link_gbps", "finite"]),
    (["traffic.groups.0.flows=10000000000"], ["traffic.groups[0].flows", "int32"]),
    (["seed=100000000000000000000000"], ["seed"]),
    (["kernel.netdev_max_backlog=10000000000"], ["kernel.netdev_max_backlog"]),
    (["apps.0.rcvbuf=1000000000000"], ["apps[0].rcvbuf"]),
    (["kernel.hashrnd=zz"], ["kernel.hashrnd", "32 hex digits"]),
    (["nic.rss.key=abcd"], ["nic.rss.key", "40"]),
    (["host.kernel=6.25"], ["host.kernel", "6.25", "3.0-3.19", "7.0-7.1"]),
    (["host.kernel=banana"], ["host.kernel", "\"6.19\""]),
    (["host.cost_profile=/dev/zero"], ["host.cost_profile", "/dev/zero"]),
    (["host.cost_profile=/"], ["host.cost_profile", "directory"]),
    # paths and values that lead nowhere
    (["traffic.groups.x.flows=5"], ["traffic.groups.x.flows", "not an index",
                                    "traffic.groups.0"]),
    (["apps.5.cpus=1"], ["apps.5.cpus", "no entry 5", "apps.0"]),
    (["apps.-1.cpus=1"], ["apps.-1.cpus", "not an index"]),
    (["duration.x=1"], ["duration.x", "not a section", "duration=VALUE"]),
    (["name=[unclosed"], ["--set", "name=[unclosed", "malformed YAML", "quote"]),
    (["name=" + "[" * 20000], ["--set", "nested deeper than 64"]),
    (["seed=!!python/name:os.system"], ["--set", "constructor"]),
    (["³=1"], ["³", "unknown key"]),
    (["apps.³.cpus=1"], ["apps.³.cpus", "not an index"]),
    (["=5"], ["not a dotted path"]),
    (["nic..queues=2"], ["nic..queues", "not a dotted path"]),
    (["nic.que\nues=2"], ["nic.'que\\nues'", "unknown key"]),
    ([".".join(["a"] * 5000) + "=1"], ["5000 parts"]),
    (["nic=5"], ["nic", "mapping"]),
]


@pytest.mark.parametrize("items, needles", SET_CASES,
                         ids=[c[0][-1][:40] for c in SET_CASES])
def test_bad_set_is_one_line_exit_2(capsys, items, needles):
    line = cli_error(capsys, *RUN, *sets(*items))
    for n in needles:
        assert n in line, (n, line)


# ------------------------------------------------------------------ files


def _with(old: str, new: str) -> str:
    assert old in DEFAULT_YAML
    return DEFAULT_YAML.replace(old, new)


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n"
    for i in range(8)) + "name: *i\n"

FILE_CASES = [
    ("traffic_list", "name: x\ntraffic: [1, 2]\n", ["traffic", "mapping", "list"]),
    ("traffic_scalar", "name: x\ntraffic: x\n", ["traffic", "mapping"]),
    ("top_list", "[1, 2]\n", ["top level", "mapping"]),
    ("empty", "", ["top level"]),
    ("random_bytes", bytes((i * 193 + 71) % 256 for i in range(4096)), ["not UTF-8"]),
    ("latin1", _with("name: default", "name: café").encode("latin-1"), ["not UTF-8"]),
    ("utf16", DEFAULT_YAML.encode("utf-16"), ["not UTF-8"]),
    ("nul", _with("name: default", "name: de\x00fault"), ["NUL"]),
    ("nested_20000", "name: " + "[" * 20000 + "\n", ["nested deeper than 64"]),
    ("nested_maps", "name: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", ["nested deeper"]),
    ("alias_bomb", ALIAS_BOMB, ["aliases expand"]),
    ("alias_cycle", "a: &a [1, *a]\n", ["cycle"]),
    ("huge_int", _with("seed: 1", "seed: 1" + "0" * 5000), ["integer of 5,001"]),
    ("python_tag", "name: !!python/object/apply:os.getcwd []\n", ["constructor"]),
    ("cpus_empty", _with('cpus: "0-3"', 'cpus: ""'), ["apps[0].cpus", "no CPU"]),
    ("cpus_reversed", _with('cpus: "0-3"', 'cpus: "3-1"'), ["apps[0].cpus", "backwards"]),
    ("kernel_number", _with('kernel: "6.19"', "kernel: 6.20"), ["host.kernel", "'6.20'"]),
    ("cpus_count_range", _with("cpus: 4\n", 'cpus: "0-15"\n'), ["host.cpus", "write 16"]),
]


@pytest.mark.parametrize("name, content, needles", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_file_is_one_line_exit_2(tmp_path, capsys, name, content, needles):
    path = tmp_path / f"{name}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    line = cli_error(capsys, "run", str(path), "--json")
    for n in [str(path)] + needles:
        assert n in line, (n, line)


def test_duration_below_the_time_step(capsys):
    line = cli_error(capsys, "run", "default", "--duration", "1e-300")
    assert "duration" in line and "1 ns" in line


def test_cost_profile_values_are_checked(tmp_path, capsys):
    prof = (BUILTIN_DIR.parent / "profiles" / "modern-x86.yaml").read_text()
    for bad in (".nan", ".inf", "-1", "1e300", "true"):
        path = tmp_path / "p.yaml"
        path.write_text(prof.replace("ns: 167.0", f"ns: {bad}", 1))
        line = cli_error(capsys, *RUN, *sets(f"host.cost_profile={path}"))
        assert "host.cost_profile" in line and "stages.stack_rx.ns" in line, line


def test_devices_and_folders_as_scenarios(capsys):
    assert "not a regular file" in cli_error(capsys, "run", "/dev/zero")
    assert "directory" in cli_error(capsys, "run", "/")
    assert "built-in name (cpumap, default)" in cli_error(capsys, "run", "nope.yaml")


# ------------------------------------------------------------------ written the kernel's way


def test_builtin_scenario_by_name_with_or_without_yaml():
    assert load_scenario("default.yaml") == load_scenario("default")


def test_run_default_yaml_and_the_readme_tour(capsys):
    code = main(["run", "default.yaml", "--json", "--duration", "0.001",
                 "--set", "kernel.rps_cpus=f", "--set", "host.kernel=5.15"])
    out, err = capsys.readouterr()
    assert code == 0, err
    config = json.loads(out)["config"]
    assert config["kernel"] == "5.15" and config["rps_cpus"] == ["f"] * 4


def _load(tmp_path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(str(path))


def test_kernel_versions_are_text_in_yaml_and_set(tmp_path):
    assert _load(tmp_path, _with('kernel: "6.19"', "kernel: 6.10")).host.kernel == "6.10"
    assert _load(tmp_path, _with('kernel: "6.19"', "kernel: 5.4.0-rc1")).host.kernel == (
        "5.4.0-rc1")
    sc = with_overrides(load_scenario("default"), parse_sets(["host.kernel=5.15"]))
    assert sc.host.kernel == "5.15"
    sc = with_overrides(load_scenario("default"), parse_sets(["host.kernel=6.10"]))
    assert sc.host.kernel == "6.10"


@pytest.mark.parametrize("value, cpus, ncpu", [
    ("0", [], 4),  # off
    ("10", [4], 8),  # hex, bit 4: what `echo 10 > rps_cpus` means
    ("0xffff", list(range(16)), 16),
    ("ffff", list(range(16)), 16),
    ("ff,ffffffff", list(range(40)), 40),  # as sysfs prints it on a 40-CPU host
    ("010", [4], 8),
])
def test_rps_masks_from_set(value, cpus, ncpu):
    base = with_overrides(load_scenario("default"), {"host.cpus": ncpu})
    sc = with_overrides(base, parse_sets([f"kernel.rps_cpus={value}"]))
    assert parse_mask(sc.kernel.rps_cpus) == cpus
    sc = with_overrides(base, parse_sets([f"kernel.flow_limit_cpu_bitmap={value}"]))
    assert parse_mask(sc.kernel.flow_limit_cpu_bitmap) == cpus


def test_rps_masks_from_yaml_and_python(tmp_path):
    text = _with("cpus: 4\n", "cpus: 8\n").replace(
        "netdev_max_backlog: 1000", "netdev_max_backlog: 1000\n  rps_cpus: {0: 10, 1: 6}")
    sc = _load(tmp_path, text)
    assert sc.kernel.rps_cpus == {0: "10", 1: "6"}  # YAML ints keep their sysfs text
    d = load_scenario("default").model_dump()
    d["host"]["cpus"] = 16
    d["kernel"]["rps_cpus"] = 0xFFFF  # a Python int is the mask's value
    assert parse_mask(scenario_from_dict(d).kernel.rps_cpus) == list(range(16))


def test_cpulists_wherever_a_cpu_set_is_asked(tmp_path):
    sc = with_overrides(load_scenario("default"), parse_sets([
        "nic.irq_affinity=0-3", "apps.0.cpus=0-1,3", "apps.0.migrate={every_s: 0.01, "
        "cpus: '0-15:2/4'}", "host.cpus=16"]))
    assert sc.nic.irq_affinity == [0, 1, 2, 3]  # one CPU per queue, in order
    assert sc.apps[0].cpu_list() == [0, 1, 3]
    sc = with_overrides(sc, parse_sets(["apps.0.cpus=[3, 1, 1]"]))
    assert sc.apps[0].cpu_list() == [1, 3]
    sc = _load(tmp_path, _with("queues: 4\n", 'queues: 4\n  irq_affinity: "0-3"\n'))
    assert sc.nic.irq_affinity == [0, 1, 2, 3]


def test_yaml_numbers_where_text_is_meant(tmp_path):
    sc = _load(tmp_path, _with("name: default", "name: 1.10").replace(
        "netdev_max_backlog: 1000", "netdev_max_backlog: 1000\n  flow_limit_variant: 2013"))
    assert sc.name == "1.10" and sc.kernel.flow_limit_variant == "2013"


def test_schema_errors_name_the_source_of_the_limit():
    d = load_scenario("default").model_dump()
    d["nic"]["rx_usecs"] = 9000
    with pytest.raises(UsageError, match=r"nic\.rx_usecs: .*8160.*ice_txrx\.h"):
        scenario_from_dict(d)


# ------------------------------------------------------------------ properties

forms = st.one_of(
    st.just("default"),
    st.builds(lambda n: {"equal": n}, st.integers(-2, 20)),
    st.builds(lambda w: {"weight": w}, st.lists(st.integers(-1, 5), min_size=0, max_size=20)),
    st.lists(st.integers(-2, 20), min_size=0, max_size=16),
)


@settings(max_examples=200, deadline=None)
@given(nq=st.integers(1, 16), log_size=st.integers(0, 9), spec=forms)
def test_no_table_past_the_queues_passes_validation(nq, log_size, spec):
    """Whatever indirection a user writes, either the schema refuses it in one line or
    the table the compiled loop indexes names only queues that exist."""
    from rxlab.build import _indirection

    d = load_scenario("default").model_dump()
    d["nic"]["queues"] = nq
    d["nic"]["rss"]["table_size"] = 1 << log_size
    d["nic"]["rss"]["indirection"] = spec
    try:
        sc = scenario_from_dict(d)
    except UsageError as err:
        assert "\n" not in str(err) and "nic.rss.indirection" in str(err)
        return
    table = _indirection(sc.nic.rss.indirection, 1 << log_size, nq, "nic.rss.indirection")
    assert table.shape == (1 << log_size,)
    assert np.all((table >= 0) & (table < nq))


def test_dates_stay_text_and_duplicate_keys_are_errors(tmp_path, capsys):
    base = "\n".join(line for line in BUILTIN_DIR.joinpath("default.yaml").read_text()
                     .splitlines() if not line.startswith(("description:", "seed:")))
    p = tmp_path / "dated.yaml"
    p.write_text("description: 2001-13-45\n" + base)  # no field is a date: stays text
    assert main(["run", str(p), "--duration", "0.001", "--json"]) == 0
    capsys.readouterr()
    p.write_text("seed: 7\n" + base + "\nseed: 8\n")
    assert "'seed' given twice (first on line 1)" in cli_error(capsys, "run", str(p))
    merged = tmp_path / "merged.yaml"  # a key merged in with '<<' may be overridden
    merged.write_text("a: &a {x: 1}\nb:\n  <<: *a\n  x: 2\n")
    from rxlab.inputs import load_yaml

    assert load_yaml(merged)["b"] == {"x": 2}
