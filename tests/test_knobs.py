"""A setting rxlab knows of but does not model gets its own line, distinct from a
misspelling (which names the nearest key); host show/export list what they read of them."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from rxlab import knobs
from rxlab.errors import UsageError
from rxlab.host import read as host_read
from rxlab.scenario import App, Kernel, Nic, load_scenario, scenario_from_dict

BASE = load_scenario("default").model_dump(mode="python", exclude_none=True)
SECTION_MODEL = {"kernel": Kernel, "nic": Nic, "apps": App}


def _refused(section: str, key: str, value=1) -> str:
    data = copy.deepcopy(BASE)
    target = data["apps"][0] if section == "apps" else data.setdefault(section, {})
    target[key] = value
    with pytest.raises(UsageError) as err:
        scenario_from_dict(data, "s.yaml")
    return str(err.value)


@pytest.mark.parametrize("knob", knobs.UNMODELLED, ids=lambda k: f"{k.section}.{k.key}")
def test_every_unmodelled_knob_is_refused_with_its_own_line(knob):
    msg = _refused(knob.section, knob.key)
    assert "\n" not in msg
    assert "not modelled by this version of rxlab" in msg and knob.what in msg, msg
    assert "unknown key" not in msg


@pytest.mark.parametrize("knob", knobs.UNMODELLED, ids=lambda k: f"{k.section}.{k.key}")
def test_no_knob_in_the_table_is_a_field_rxlab_models(knob):
    # a knob that gains a model leaves the table (it would never be reached)
    assert knob.key not in SECTION_MODEL[knob.section].model_fields


@pytest.mark.parametrize("path", ["nic.irq_suspend_timeout",
                                  "kernel.busy_poll",
                                  "kernel.skb_defer_max",
                                  "nic.adaptive_rx", "nic.gro"])
def test_the_issues_knobs_are_refused_as_known(path):
    section, key = path.split(".")
    assert "a known kernel setting" in _refused(section, key)


@pytest.mark.parametrize("section,key,near", [
    ("kernel", "rps_cpu", "rps_cpus"), ("kernel", "netdev_max_backlg", "netdev_max_backlog"),
    ("nic", "queuez", "queues"), ("nic", "rx_usec", "rx_usecs"), ("apps", "cpuss", "cpus")])
def test_a_misspelling_names_the_nearest_key(section, key, near):
    msg = _refused(section, key)
    assert f"unknown key; did you mean {near}?" in msg, msg
    assert "not modelled" not in msg


def test_a_key_far_from_every_other_asks_to_check_the_spelling():
    assert "unknown key; check the spelling" in _refused("kernel", "zzzz")


def test_the_cli_line_and_exit_status():
    p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", "run", "default",
                        "--set", "kernel.busy_poll=50"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("rxlab: error: default: kernel.busy_poll: a known kernel "
                               "setting (sysctl net.core.busy_poll), not modelled by this "
                               "version of rxlab"), p.stderr
    assert p.stderr.count("\n") == 1


def test_host_reads_the_knobs_a_file_shows(tmp_path):
    core = tmp_path / "proc/sys/net/core"
    core.mkdir(parents=True)
    (core / "busy_poll").write_text("50\n")  # the rest absent: left out
    (core / "busy_read").write_text("50\n")  # modelled: not read as unmodelled
    (core / "skb_defer_max").write_text("64\n")
    dev = tmp_path / "sys/class/net/eth9"
    dev.mkdir(parents=True)
    (dev / "napi_defer_hard_irqs").write_text("2\n")  # modelled: not read as unmodelled
    assert host_read.read_unmodelled("kernel", root=str(tmp_path)) == {
        "net.core.busy_poll": "50", "net.core.skb_defer_max": "64"}
    assert host_read.read_unmodelled("nic", "eth9", str(tmp_path)) == {}


def test_host_show_and_export_name_what_they_read_and_what_not():
    info = {"unmodelled": {"net.core.busy_poll": "50"}, "devices": {
        "eth9": {"unmodelled": {"some_attribute": "20000"}},
        "eth8": {"unmodelled": {"some_attribute": "0"}}}}
    read, unread = host_read.unmodelled_lines(info, ["eth9"])
    assert read == "not modelled, read: net.core.busy_poll=50 eth9/some_attribute=20000"
    for k in knobs.not_read():
        assert k.what in unread
    assert "adaptive-rx" in unread and "irq-suspend-timeout" in unread


def test_a_sweep_grid_over_an_unmodelled_knob_is_refused_the_same_way():
    from rxlab.sweep.spec import validate_override

    with pytest.raises(UsageError) as err:
        validate_override(BASE, "kernel.busy_poll", 50, "sweep.grid.kernel.busy_poll")
    assert str(err.value).startswith("sweep.grid.kernel.busy_poll: a known kernel setting "
                                     "(sysctl net.core.busy_poll), not modelled")
    with pytest.raises(UsageError) as err:
        validate_override(BASE, "kernel.netdev_max_backlg", 1, "sweep.grid.x")
    assert "unknown scenario path; did you mean netdev_max_backlog?" in str(err.value)
