"""The capability probe (rxlab.host.caps) on fake /proc trees, and what the real-host
layer does with its answers: kernels without flow limit, without RPS, without busy
polling, a process outside the initial network namespace, a driver without an ethtool
operation. Each kernel is a folder the test writes; nothing here needs root."""

from __future__ import annotations

import gzip
import os

import pytest

from rxlab.errors import UsageError
from rxlab.host import caps, ethtool, guard
from rxlab.host.caps import Capabilities

CORE_SYSCTLS = {
    "netdev_max_backlog": "1000", "netdev_budget": "300", "netdev_budget_usecs": "2000",
    "dev_weight": "64", "rps_sock_flow_entries": "0", "rps_default_mask": "0",
    "flow_limit_cpu_bitmap": "0", "flow_limit_table_len": "4096", "busy_read": "0",
    "busy_poll": "0",
}
FULL_CONFIG = {"CONFIG_NET_FLOW_LIMIT": "y", "CONFIG_RPS": "y", "CONFIG_NET_RX_BUSY_POLL": "y",
               "CONFIG_BPF_SYSCALL": "y", "CONFIG_XDP_SOCKETS": "y", "CONFIG_VETH": "m",
               "CONFIG_NET_NS": "y", "CONFIG_NET_CLS_BPF": "m", "CONFIG_NET_SCH_INGRESS": "m",
               "CONFIG_HZ": "250"}


def fake_kernel(root, *, without=(), config=True, netns="net:[4026531840]",
                drop_sysctls=()):
    """A /proc tree: the options in ``without`` not set (and their sysctls absent), the
    process in namespace ``netns`` (PID 1's is net:[4026531840])."""
    proc = root / "proc"
    core = proc / "sys/net/core"
    core.mkdir(parents=True)
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/unprivileged_bpf_disabled").write_text("2\n")
    gone = set(drop_sysctls)
    for feature, names in caps.SYSCTL_FEATURE.items():
        if caps.FEATURES[feature].config in without:
            gone |= set(names)
    if netns != "net:[4026531840]":  # the global sysctls exist in the initial namespace only
        gone |= set(CORE_SYSCTLS)
    for name, value in CORE_SYSCTLS.items():
        if name not in gone:
            (core / name).write_text(value + "\n")
    for pid, ns in (("self", netns), ("1", "net:[4026531840]")):
        (proc / pid / "ns").mkdir(parents=True)
        os.symlink(ns, proc / pid / "ns" / "net")
    if config:
        lines = [f"# {k} is not set" if k in without else f"{k}={v}"
                 for k, v in FULL_CONFIG.items()]
        with gzip.open(proc / "config.gz", "wt") as fh:
            fh.write("\n".join(lines) + "\n")
    return Capabilities(root=str(root), euid=0)


@pytest.fixture
def on_kernel(tmp_path, monkeypatch):
    """Make a fake kernel the host's for rxlab.host (probe) and the sysctl guard."""
    def make(**kw):
        cap = fake_kernel(tmp_path, **kw)
        monkeypatch.setattr(caps, "_HOST", cap)
        monkeypatch.setattr(guard, "CORE", str(tmp_path / "proc/sys/net/core"))
        return cap
    return make


def test_a_full_kernel_has_everything(tmp_path):
    cap = fake_kernel(tmp_path)
    assert cap.summary() == {n: None for n in caps.FEATURES}
    assert cap.initial_netns and cap.root_user and cap.config["CONFIG_HZ"] == "250"


def test_no_flow_limit_is_named_by_its_option(tmp_path):
    cap = fake_kernel(tmp_path, without=("CONFIG_NET_FLOW_LIMIT",))
    assert cap.why_not("flow_limit") == "kernel built without CONFIG_NET_FLOW_LIMIT"
    assert cap.sysctl_why_not("flow_limit_table_len") == cap.why_not("flow_limit")
    assert cap.sysctl_why_not("netdev_max_backlog") is None
    assert cap.has("rps") and cap.has("busy_poll")
    assert cap.missing(["flow_limit", "rps"]) == [
        "flow_limit: kernel built without CONFIG_NET_FLOW_LIMIT"]


def test_without_a_published_config_the_missing_file_is_the_cause(tmp_path):
    cap = fake_kernel(tmp_path, without=("CONFIG_NET_FLOW_LIMIT",), config=False)
    assert cap.config is None
    assert cap.why_not("flow_limit") == ("this kernel has no /proc/sys/net/core/"
                                         "flow_limit_cpu_bitmap (built without "
                                         "CONFIG_NET_FLOW_LIMIT?)")
    assert cap.has("xdp_sockets")  # known only from the config, which does not say no


def test_no_rps(tmp_path):
    cap = fake_kernel(tmp_path, without=("CONFIG_RPS",))
    assert cap.why_not("rps") == "kernel built without CONFIG_RPS"
    assert cap.sysctl_why_not("rps_sock_flow_entries") == "kernel built without CONFIG_RPS"


def test_no_busy_polling(tmp_path):
    cap = fake_kernel(tmp_path, without=("CONFIG_NET_RX_BUSY_POLL",))
    assert cap.why_not("busy_poll") == "kernel built without CONFIG_NET_RX_BUSY_POLL"
    assert cap.sysctl_why_not("busy_read") == cap.why_not("busy_poll")


def test_another_namespace_is_not_a_missing_option(tmp_path):
    cap = fake_kernel(tmp_path, netns="net:[4026532999]")
    assert not cap.initial_netns
    why = cap.why_not("flow_limit")
    assert why.startswith("not in the initial network namespace"), why
    assert cap.sysctl_why_not("netdev_max_backlog").startswith("not in the initial")
    assert cap.has("xdp_sockets")  # no file to look at: the config decides


def test_an_unsupported_ethtool_operation_names_the_ioctl(monkeypatch):
    monkeypatch.setattr(ethtool, "_run", lambda args: (
        (1, "", "ethtool: bad command line argument(s)") if args[0] == "--json"
        else (1, "", "Cannot get RX network flow hashing options: Operation not supported")))
    with pytest.raises(ethtool.EthtoolError) as err:
        ethtool.flow_hash("eth9", "udp4")
    assert str(err.value) == ("Operation not supported: the driver does not support "
                              "ETHTOOL_GRXFH")
    with pytest.raises(ethtool.EthtoolError, match="does not support ETHTOOL_SRSSH"):
        ethtool.run_checked(["-X", "eth9", "equal", "2"])


# ------------------------------------------------------ what kernel-check and apply do


def test_kernel_check_skips_only_the_flow_limit_check(on_kernel):
    from rxlab.kcheck.checks import CHECKS
    from rxlab.kcheck.runner import why_skipped

    on_kernel(without=("CONFIG_NET_FLOW_LIMIT",))
    assert why_skipped("flow_limit_shedding", None) == (
        "flow_limit: kernel built without CONFIG_NET_FLOW_LIMIT")
    others = [n for n in ("rps_cpu_choice", "rps_flow_stickiness", "rfs_follows_thread",
                          "backlog_drop_accounting") if n in CHECKS]
    assert len(others) == 4 and all(why_skipped(n, None) is None for n in others)


def test_kernel_check_runs_the_flow_limit_check_where_the_kernel_has_it(on_kernel):
    from rxlab.kcheck.runner import why_skipped

    on_kernel()
    assert why_skipped("flow_limit_shedding", None) is None


def test_the_lab_preflight_refuses_a_kernel_without_rps(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda t: f"/usr/bin/{t}")
    monkeypatch.setattr(caps, "_HOST", fake_kernel(tmp_path, without=("CONFIG_RPS",)))
    assert guard.cannot_run() == "rps: kernel built without CONFIG_RPS"


def test_the_sysctl_guard_leaves_an_absent_feature_off(on_kernel):
    on_kernel(without=("CONFIG_NET_FLOW_LIMIT",))
    g = guard.Sysctls()
    assert set(g.orig) == {"netdev_max_backlog", "rps_sock_flow_entries"}
    g.set("flow_limit_cpu_bitmap", "0")  # off: nothing to write
    with pytest.raises(guard.CannotRun, match="CONFIG_NET_FLOW_LIMIT"):
        g.set("flow_limit_cpu_bitmap", "2")
    g.set("netdev_max_backlog", 64)
    assert g.restore() == [] and guard.read_sysctl("netdev_max_backlog") == "1000"


def _info_without_flow_limit(cap, cpus=2):
    from test_host import synthetic_host

    info = synthetic_host(cpus)
    for name in caps.SYSCTL_FEATURE["flow_limit"]:
        info["sysctls"].pop(name, None)
    info["sysctls_absent"] = {n: cap.why_not("flow_limit")
                              for n in caps.SYSCTL_FEATURE["flow_limit"]}
    return info


def test_apply_plans_an_export_and_refuses_flow_limit_naming_the_option(on_kernel,
                                                                         monkeypatch):
    from rxlab.host import apply as host_apply
    from rxlab.host.export import scenario_from_host
    from rxlab.scenario import scenario_from_dict

    cap = on_kernel(without=("CONFIG_NET_FLOW_LIMIT",))
    monkeypatch.setattr(host_apply, "cpu_count", lambda: 2)
    info = _info_without_flow_limit(cap)
    data, notes = scenario_from_host(info, "eth9")
    assert any("CONFIG_NET_FLOW_LIMIT" in n for n in notes)
    assert "flow_limit_cpu_bitmap" not in data["kernel"]  # no made-up value
    sc = scenario_from_dict(data, "export")
    assert sc.kernel.flow_limit_cpu_bitmap == "0"  # the export models no flow limit
    steps, notes, _ = host_apply.plan(sc, "eth9", info=info)
    assert not [s for s in steps if s.target.startswith("flow_limit")]
    assert any("flow_limit_cpu_bitmap not written: kernel built without "
               "CONFIG_NET_FLOW_LIMIT" in n for n in notes)
    data["kernel"]["flow_limit_cpu_bitmap"] = "1"
    with pytest.raises(UsageError, match="CONFIG_NET_FLOW_LIMIT") as err:
        host_apply.plan(scenario_from_dict(data, "fl"), "eth9", info=info)
    assert "\n" not in str(err.value)
