"""``host apply --netns``: the plan marks what is global to the machine (net.core sysctls,
IRQ affinity) and not what belongs to the namespace's device (sysfs queue files, ethtool).
Without a lab: the plan is given, so this runs without root or namespaces."""

from __future__ import annotations

import yaml
from support.plan_output import plan_steps

from rxlab.cli.main import main
from rxlab.host import apply as host_apply
from rxlab.host import netns
from rxlab.host.apply import Step

STEPS = [Step("sysctl", "netdev_max_backlog", "1000", "5000"),
         Step("sysctl", "rps_sock_flow_entries", "0", "32768"),
         Step("sysctl", "netdev_budget", "300", "600"),
         Step("irq", "57", "0-3", "2"),
         Step("rps_cpus", "rx-0", "0", "f"),
         Step("channels", "rx", {"count": 4}, {"count": 2})]


def test_machine_wide_steps_are_the_sysctls_and_irqs():
    assert [s.machine_wide for s in STEPS] == [True, True, True, True, False, False]


def test_apply_in_a_namespace_marks_the_global_settings(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(netns, "check_netns", lambda name: name)
    monkeypatch.setattr(host_apply, "unfinished", lambda dev, ns, locked=False: None)
    monkeypatch.setattr(host_apply, "plan", lambda sc, dev, ns: (STEPS, [], {}))
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump({"name": "x", "traffic": {"groups": [{
        "name": "g", "flows": 1, "proto": "udp", "src": {"addr": "10.0.0.1"},
        "dst": {"addr": "10.0.0.2"}, "sport": {"value": 1}, "dport": {"value": 2},
        "rate": {"pps": 1000}}]}}))
    assert main(["host", "apply", str(sc), "--dev", "rxb", "--netns", "labns"]) == 0
    out = capsys.readouterr().out
    lines = plan_steps(out)
    assert len(lines) == len(STEPS)
    marked = [ln for ln in lines if ln.endswith("; machine-wide, not only netns labns")]
    assert [ln.split("    #")[0].strip() for ln in marked] == [
        "sysctl -w net.core.netdev_max_backlog=5000",
        "sysctl -w net.core.rps_sock_flow_entries=32768",
        "sysctl -w net.core.netdev_budget=600",
        "echo 2 > /proc/irq/57/smp_affinity_list"]
    # without --netns nothing is marked: everything is in the one namespace there is
    assert main(["host", "apply", str(sc), "--dev", "rxb"]) == 0
    assert "machine-wide" not in capsys.readouterr().out
