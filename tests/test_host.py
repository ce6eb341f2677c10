"""rxlab host show / export / apply / rollback and rxlab top.

Unit tests on canned ethtool output and synthetic host descriptions run anywhere; the rest
run against veth devices in network namespaces this module creates (root only, skipped
with the reason otherwise), and leave every value as they found it: the global net.core
sysctls are saved first and written back in ``finally``, the namespaces are deleted.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rxlab import cpuset
from rxlab.cli.main import main
from rxlab.errors import UsageError
from rxlab.host import apply as host_apply
from rxlab.host import caps, ethtool
from rxlab.host.export import scenario_from_host
from rxlab.host.netns import check_dev, in_netns
from rxlab.host.read import SYSCTL_DIR, SYSCTLS, _queue_of, cpu_count, read_host
from rxlab.scenario import load_scenario, scenario_from_dict

# ----------------------------------------------------------------------------- units


@pytest.mark.parametrize("name", ["eth0", "veth-a_1", "x" * 15, "a.b", "ens1f0np0"])
def test_valid_device_names(name):
    assert check_dev(name) == name


@pytest.mark.parametrize("name", ["", "x" * 16, "a/b", "a:b", "a b", "a\tb", ".", "..",
                                  "é" * 8, None])
def test_invalid_device_names(name):
    with pytest.raises(UsageError, match="bad device name"):
        check_dev(name)


@pytest.mark.parametrize("irq, ids, want", [
    ("eth0-TxRx-3", ["eth0"], ("rxtx", 3)),
    ("virtio2-input.0", ["eth0", "virtio2"], ("rx", 0)),
    ("virtio2-output.1", ["eth0", "virtio2"], ("tx", 1)),
    ("virtio2-config", ["eth0", "virtio2"], None),
    ("mlx5_comp7@pci:0000:3b:00.0", ["ens1", "0000:3b:00.0"], ("rxtx", 7)),
    ("ens1f0-rx-2", ["ens1f0"], ("rx", 2)),
    ("eth10-TxRx-0", ["eth1"], None),
    ("eth0", ["eth0"], None),
])
def test_queue_irq_names(irq, ids, want):
    assert _queue_of(irq, ids) == want


X_TEXT = """RX flow hash indirection table for eth9 with 4 RX ring(s):
    0:      0     1     2     3     0     1     2     3
    8:      0     1     2     3     0     1     2     3
RSS hash key:
6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa
RSS hash function:
    toeplitz: on
    xor: off
    crc32: off
"""
N_TEXT = """UDP over IPV4 flows use these fields for computing Hash flow key:
IP SA
IP DA
L4 bytes 0 & 1 [TCP/UDP src port]
L4 bytes 2 & 3 [TCP/UDP dst port]
"""
L_TEXT = """Channel parameters for eth9:
Pre-set maximums:
RX:\t\tn/a
TX:\t\tn/a
Other:\t\t1
Combined:\t8
Current hardware settings:
RX:\t\tn/a
TX:\t\tn/a
Other:\t\t1
Combined:\t4
"""


def fake_ethtool(monkeypatch, answers):
    calls = []

    def run(args):
        calls.append(args)
        key = " ".join(a for a in args if a != "eth9")
        if key.startswith("--json"):
            return 1, "", "ethtool: bad command line argument(s)"
        return answers.get(key, (1, "", "Operation not supported"))

    monkeypatch.setattr(ethtool, "_run", run)
    return calls


def test_ethtool_text_output_is_parsed_when_json_is_unsupported(monkeypatch):
    fake_ethtool(monkeypatch, {"-x": (0, X_TEXT, ""), "-n rx-flow-hash udp4": (0, N_TEXT, ""),
                               "-l": (0, L_TEXT, "")})
    r = ethtool.rxfh("eth9")
    assert r["rings"] == 4 and r["indirection"] == [0, 1, 2, 3] * 4
    assert r["key"].startswith("6d:5a:56") and r["hfunc"] == "toeplitz" and r["source"] == "text"
    assert ethtool.flow_hash("eth9", "udp4") == "sdfn"
    ch = ethtool.channels("eth9")
    assert ch["current"] == {"rx": None, "tx": None, "other": 1, "combined": 4}
    assert ch["max"]["combined"] == 8
    with pytest.raises(ethtool.EthtoolError, match="Operation not supported"):
        ethtool.flow_hash("eth9", "tcp6")


def test_ethtool_json_output_is_used_when_available(monkeypatch):
    doc = [{"ifname": "eth9", "rx-max": 0, "tx-max": 0, "other-max": 1, "combined-max": 8,
            "rx": 0, "tx": 0, "other": 1, "combined": 2}]
    monkeypatch.setattr(ethtool, "_run", lambda args: (0, json.dumps(doc), ""))
    assert ethtool.channels("eth9")["current"]["combined"] == 2
    assert ethtool.channels("eth9")["source"] == "json"


def synthetic_host(cpus=2):
    """What read_host returns for a 4-queue RSS NIC with identified queue IRQs."""
    return {
        "cpus": cpus, "cpus_online": f"0-{cpus - 1}", "kernel": "6.18.44-test",
        "hostname": "box", "netns": None, "notes": [],
        "sysctls": {"netdev_max_backlog": 1000, "netdev_budget": 300,
                    "netdev_budget_usecs": 8000, "dev_weight": 64,
                    "flow_limit_cpu_bitmap": "0", "flow_limit_table_len": 4096,
                    "rps_sock_flow_entries": 0},
        "devices": {"eth9": {
            "ifindex": 3, "driver": "ixgbe", "device_path": "/sys/devices/pci/0000:01:00.0",
            "operstate": "up", "mtu": 1500, "rx_queues": 4, "tx_queues": 4,
            "rx": [{"queue": q, "rps_cpus": "0" if q else "2", "rps_flow_cnt": 0}
                   for q in range(4)],
            "tx": [{"queue": q, "xps_cpus": "0"} for q in range(4)],
            "irqs": [{"irq": 40 + q, "name": f"eth9-TxRx-{q}", "kind": "rxtx", "queue": q,
                      "smp_affinity_list": str(q % cpus), "effective_affinity_list": None}
                     for q in range(4)],
            "channels": {"supported": True, "max": {"rx": None, "tx": None, "other": 1,
                                                    "combined": 8},
                         "current": {"rx": None, "tx": None, "other": 1, "combined": 4}},
            "rss": {"supported": True, "rings": 4, "indirection": [0, 1, 2, 3] * 32,
                    "key": "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:"
                           "30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa",
                    "hfunc": "toeplitz"},
            "flow_hash": {"supported": True, "tcp4": "sdfn", "udp4": "sd", "tcp6": "sdfn",
                          "udp6": "sd"},
        }},
    }


def test_export_of_an_rss_nic_loads_as_a_scenario():
    data, notes = scenario_from_host(synthetic_host(), "eth9")
    sc = scenario_from_dict(data)
    assert sc.host.cpus == 2 and sc.host.kernel == "6.18"
    assert sc.nic.queues == 4 and sc.nic.irq_affinity == [0, 1, 0, 1]
    assert sc.nic.rss.table_size == 128 and sc.nic.rss.indirection == [0, 1, 2, 3] * 32
    assert sc.nic.rss.key.startswith("6d5a56da") and sc.nic.rss.flow_hash["udp4"] == "sd"
    assert sc.kernel.rps_cpus == {0: "2", 1: "0", 2: "0", 3: "0"}
    assert sc.kernel.netdev_budget_usecs == 8000
    assert sc.traffic.groups and sc.apps[0].cpu_list() == [0, 1]
    assert not any("RSS" in n for n in notes)


@st.composite
def masks(draw, ncpu: int):
    """(CPU set, a mask naming it in one of the forms bitmap_parse() reads: 32-bit words
    with commas, each with or without its leading zeros, extra leading zero words)."""
    cpus = draw(st.sets(st.integers(0, ncpu - 1), max_size=ncpu))
    words = ["0"] * draw(st.integers(0, 2)) + cpuset.format_mask(cpus).split(",")
    texts = []
    for w in words:
        digits = f"{int(w, 16):x}"
        texts.append("0" * draw(st.integers(0, 8 - len(digits))) + digits)
    return cpus, ",".join(texts)


def test_rps_cpus_1_0_is_cpu_32_on_the_host_too(monkeypatch):
    monkeypatch.setattr(host_apply, "cpu_count", lambda: 64)
    info = synthetic_host(64)
    data, _ = scenario_from_host(info, "eth9")
    data["kernel"]["rps_cpus"] = "1,0"
    steps, _, _ = host_apply.plan(scenario_from_dict(data, "t"), "eth9", info=info)
    rps = [s for s in steps if s.kind == "rps_cpus"]
    assert len(rps) == 4 and all(cpuset.parse_mask(s.new) == [32] for s in rps)
    assert rps[0].command("eth9", None) == (
        "echo 1,00000000 > /sys/class/net/eth9/queues/rx-0/rps_cpus")


@settings(max_examples=300, deadline=None)
@given(masks(128))
def test_every_mask_plans_the_cpus_it_names(drawn):
    cpus, text = drawn
    planned = host_apply._check_mask(text, 128, "kernel.rps_cpus")
    assert cpuset.parse_mask(planned) == sorted(cpus) == cpuset.parse_mask(text)
    assert cpuset.normal_mask(planned) == planned  # one written form


def test_plan_on_an_rss_nic_prints_exact_commands():
    info = synthetic_host(cpus=cpu_count())
    data, _ = scenario_from_host(info, "eth9")
    steps, _, _ = host_apply.plan(scenario_from_dict(data), "eth9", info=info)
    assert steps == []  # an export applied to its own host changes nothing
    data = copy.deepcopy(data)
    data["nic"]["rss"]["indirection"] = {"weight": [3, 1]}
    data["nic"]["rss"]["flow_hash"]["udp4"] = "sdfn"
    data["nic"]["irq_affinity"] = [0, 0, 0, 0]
    data["kernel"]["rps_cpus"] = "1"
    data["kernel"]["netdev_max_backlog"] = 4096
    steps, _, _ = host_apply.plan(scenario_from_dict(data), "eth9", info=info)
    cmds = [s.command("eth9", None) for s in steps]
    assert cmds == [
        "ethtool -X eth9 weight 3 1",
        "ethtool -N eth9 rx-flow-hash udp4 sdfn",
        "echo 1 > /sys/class/net/eth9/queues/rx-0/rps_cpus",
        "echo 1 > /sys/class/net/eth9/queues/rx-1/rps_cpus",
        "echo 1 > /sys/class/net/eth9/queues/rx-2/rps_cpus",
        "echo 1 > /sys/class/net/eth9/queues/rx-3/rps_cpus",
        "echo 0 > /proc/irq/41/smp_affinity_list",
        "echo 0 > /proc/irq/43/smp_affinity_list",
        "sysctl -w net.core.netdev_max_backlog=4096",
    ]
    assert steps[0].old == {"equal": 4}  # the current table, restorable
    data["nic"]["rss"]["indirection"] = [0, 1, 0, 2] * 32
    with pytest.raises(UsageError, match="contiguous runs"):
        host_apply.plan(scenario_from_dict(data), "eth9", info=info)


def test_plan_sets_the_devices_irq_deferral_in_sysfs():
    info = synthetic_host(cpus=cpu_count())
    info["devices"]["eth9"] |= {"napi_defer_hard_irqs": 0, "gro_flush_timeout": 0}
    data, _ = scenario_from_host(info, "eth9")
    data["nic"] |= {"napi_defer_hard_irqs": 2, "gro_flush_timeout": 20000}
    steps, _, _ = host_apply.plan(scenario_from_dict(data), "eth9", info=info)
    assert [s.command("eth9", None) for s in steps] == [
        "echo 2 > /sys/class/net/eth9/napi_defer_hard_irqs",
        "echo 20000 > /sys/class/net/eth9/gro_flush_timeout"]
    assert [s.old for s in steps] == ["0", "0"]  # what the rollback writes back
    data["nic"] |= {"napi_defer_hard_irqs": {1: 2}}  # per NAPI: netlink, not applied
    steps, notes, _ = host_apply.plan(scenario_from_dict(data), "eth9", info=info)
    assert [s.target for s in steps] == ["gro_flush_timeout"]
    assert any("napi-set" in n for n in notes)
    del info["devices"]["eth9"]["gro_flush_timeout"]  # a kernel without the file
    with pytest.raises(UsageError, match="nic.gro_flush_timeout: this kernel has no"):
        host_apply.plan(scenario_from_dict(data), "eth9", info=info)


def test_rollback_of_irq_deferral_is_validated(tmp_path):
    p = tmp_path / "rb.json"
    for target, old, ok in (("napi_defer_hard_irqs", "0", True), ("gro_flush_timeout",
                                                                   "20000", True),
                            ("threaded", "0", False), ("../../proc/sysrq-trigger", "1", False),
                            ("napi_defer_hard_irqs", "2147483648", False),
                            ("gro_flush_timeout", "1; reboot", False)):
        p.write_text(_step(kind="napi", target=target, old=old, new="1"))
        if ok:
            host_apply.load_rollback(p)
        else:
            with pytest.raises(UsageError):
                host_apply.load_rollback(p)


def test_rollback_files_are_validated(tmp_path):
    doc = {"rxlab_rollback": 1, "device": "eth9", "netns": None, "state": "applied",
           "steps": [{"kind": "rps_cpus", "target": "../../../etc/passwd", "old": "0",
                      "new": "1"}]}
    p = tmp_path / "rb.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="bad queue"):
        host_apply.load_rollback(p)
    doc["steps"] = [{"kind": "sysctl", "target": "somaxconn", "old": "1", "new": "2"}]
    p.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="not one rxlab changes"):
        host_apply.load_rollback(p)
    doc["steps"] = [{"kind": "sysctl", "target": "dev_weight", "old": "1; reboot", "new": "2"}]
    p.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="bad sysctl value"):
        host_apply.load_rollback(p)
    doc["device"] = "eth9/../x"
    p.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="bad device name"):
        host_apply.load_rollback(p)
    p.write_text("{not json")
    with pytest.raises(UsageError, match="not a readable rollback file"):
        host_apply.load_rollback(p)


GOOD_STEP = {"kind": "sysctl", "target": "dev_weight", "old": "64", "new": "32"}


def _rollback_doc(**over):
    doc = {"rxlab_rollback": 1, "device": "eth9", "netns": None, "state": "applied",
           "steps": [GOOD_STEP]}
    doc.update(over)
    return json.dumps(doc)


def _step(**over):
    return _rollback_doc(steps=[{**GOOD_STEP, **over}])


def _channels(value):
    return _step(kind="channels", target="rx", old=value, new=2)


MALFORMED = {
    "superscript digit": (_step(old="²"), "bad sysctl value"),
    "arabic-indic digit": (_step(old="٣"), "bad sysctl value"),
    "10000 digits": (_step(old="9" * 10000), "bad sysctl value"),
    "steps not a list": (_rollback_doc(steps=5), "steps must be a list"),
    "steps a string": (_rollback_doc(steps="abc"), "steps must be a list"),
    "deep nesting": ("[" * 100000 + "]" * 100000, "nested too deeply"),
    "deep nesting in a step": (_step(old=json.loads("[" * 500 + "]" * 500)),
                               "bad sysctl value"),
    "not UTF-8": (b'{"device": "\xff\xfe"}', "not UTF-8"),
    "UTF-16": (_rollback_doc().encode("utf-16"), "not UTF-8"),
    "NUL byte": (_rollback_doc().replace("eth9", "eth\x00"), "NUL byte"),
    "format true": (_rollback_doc(rxlab_rollback=True), "not an rxlab rollback file"),
    "a list": ("[1, 2]", "not an rxlab rollback file"),
    "unknown state": (_rollback_doc(state="done"), "state must be one of"),
    "unknown field": (_rollback_doc(extra=1), "unknown field 'extra'"),
    "target not a string": (_step(target=5), "malformed step"),
    "kind a list": (_step(kind=["sysctl"]), "malformed step"),
    "queue with a newline": (_step(kind="rps_cpus", target="rx-1\n", old="1", new="0"),
                             "bad queue"),
    "device with a newline": (_rollback_doc(device="eth0\n"), "bad device name"),
    "irq as superscript": (_step(kind="irq", target="²", old="0", new="1"), "bad IRQ"),
    "cpulist with a newline": (_step(kind="irq", target="40", old="0-1\n", new="1"),
                               "bad irq value"),
    "channel count true": (_step(kind="channels", target="rx", old=True, new=2),
                           "bad channels value"),
    "channel queues a list": (_channels({"count": 4, "rx": [1, 2]}), "bad channels value"),
    "channel queue value a dict": (_channels({"count": 4, "rx": {"rx-3": {"rps_cpus": {}}}}),
                                   "bad channels value"),
    "rss key a number": (_step(kind="rxfh", target="eth9", old={"key": 5}, new={"equal": 2}),
                         "bad rxfh value"),
    "rss weights of bools": (_step(kind="rxfh", target="eth9", old={"weights": [True]},
                                   new={"equal": 2}), "bad rxfh value"),
    "flow type unknown": (_step(kind="flow_hash", target="sctp4", old="sd", new="sdfn"),
                          "bad flow_hash value"),
}


@pytest.mark.parametrize("text, message", MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_rollback_files_are_one_line_errors(tmp_path, capsys, text, message):
    p = tmp_path / "rb.json"
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    rc, out, err = run_cli(capsys, "host", "rollback", str(p))
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("rxlab: error: ") and message in err, err


@pytest.mark.parametrize("make, message", [
    (lambda p: p.touch() or os.truncate(p, 17 << 20),  # sparse: nothing is written
     "more than a rollback file may have"),
    (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "no such rollback file"),
], ids=["huge", "/dev/zero", "a directory", "missing"])
def test_rollback_files_that_are_not_files_are_one_line_errors(tmp_path, capsys, make,
                                                               message):
    p = tmp_path / "rb.json"
    make(p)
    rc, out, err = run_cli(capsys, "host", "rollback", str(p))
    assert rc == 2 and err.count("\n") == 1 and message in err, err


# ----------------------------------------------------------------------------- real kernel


def _lab_reason():
    from rxlab.host.lab import unavailable

    why = unavailable()
    if why is None and shutil.which("ethtool") is None:
        why = "needs ethtool (apt-get install ethtool)"
    return why


# the net.core sysctls this kernel has (no flow limit without CONFIG_NET_FLOW_LIMIT)
PRESENT = [n for n in SYSCTLS if (SYSCTL_DIR / n).exists()]
FLOW_LIMIT = caps.probe().has("flow_limit")


def _read_sysctls():
    return {n: (SYSCTL_DIR / n).read_text().strip() for n in PRESENT}


@pytest.fixture(scope="module")
def lab():
    why = _lab_reason()
    if why:
        pytest.skip(why)
    from rxlab.host.lab import Lab

    saved = _read_sysctls()
    try:
        with Lab.named(f"rxhost{os.getpid() % 100000}", queues=4) as lab:
            yield lab
    finally:
        for name, v in saved.items():
            if (SYSCTL_DIR / name).read_text().strip() != v:
                (SYSCTL_DIR / name).write_text(v + "\n")


@pytest.fixture
def sysctl_lock(lab):
    """Tests that write the machine's net.core sysctls hold kernel-check's lock, so that
    the two never change them at the same time."""
    from rxlab.host.guard import CannotRun, run_lock

    try:
        with run_lock():
            yield
    except CannotRun as err:
        pytest.skip(str(err))


def snapshot(lab):
    info = read_host(lab.ns_rx, [lab.dev_rx])
    dev = dict(info["devices"][lab.dev_rx])
    dev.pop("operstate")  # the carrier flaps for a moment after ethtool -L
    return {"sysctls": info["sysctls"], "dev": dev}


def _write(path, value):
    with open(path, "w") as fh:
        fh.write(value)


def qpath(lab, q, attr):
    return f"/sys/class/net/{lab.dev_rx}/queues/{q}/{attr}"


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_show_json_inside_a_namespace(lab, capsys):
    rc, out, _ = run_cli(capsys, "host", "show", "--json", "--netns", lab.ns_rx)
    assert rc == 0
    info = json.loads(out)
    assert info["cpus"] == cpu_count() and info["netns"] == lab.ns_rx
    assert set(info["devices"]) == {"lo", lab.dev_rx}  # the namespace's devices only
    d = info["devices"][lab.dev_rx]
    assert d["driver"] == "veth" and d["rx_queues"] == 4 and d["tx_queues"] == 4
    assert [q["rps_cpus"] for q in d["rx"]] == ["0"] * 4
    assert [q["rps_flow_cnt"] for q in d["rx"]] == [0] * 4
    assert len(d["tx"]) == 4 and all("xps_cpus" in q for q in d["tx"])
    assert d["irqs"] == []
    assert d["channels"]["supported"] and d["channels"]["max"]["rx"] == 4
    assert d["rss"] == {"supported": False, "error": "Operation not supported: the driver "
                        "does not support ETHTOOL_GRSSH"}
    assert d["flow_hash"]["supported"] is False
    sc = info["sysctls"]
    assert sc["netdev_max_backlog"] == int((SYSCTL_DIR / "netdev_max_backlog").read_text())
    assert set(sc) == set(PRESENT)
    assert set(info["sysctls_absent"]) == set(SYSCTLS) - set(PRESENT)
    if not FLOW_LIMIT:  # the cause, never a made-up value
        assert "CONFIG_NET_FLOW_LIMIT" in info["sysctls_absent"]["flow_limit_cpu_bitmap"]
        assert info["kernel_features"]["flow_limit"] == caps.probe().why_not("flow_limit")
    rc, out, _ = run_cli(capsys, "host", "show", "--netns", lab.ns_rx, "--dev", lab.dev_rx)
    assert rc == 0 and "rss: unsupported (Operation not supported: the driver does not " \
        "support ETHTOOL_GRSSH)" in " ".join(out.split())  # wrapped within 80 columns


def test_export_of_a_namespace_device_simulates(lab, capsys, tmp_path):
    before = snapshot(lab)
    path = tmp_path / "exported.yaml"
    p1, p2 = qpath(lab, "rx-1", "rps_cpus"), qpath(lab, "rx-2", "rps_flow_cnt")
    try:
        in_netns(lab.ns_rx, _write, p1, "2")
        in_netns(lab.ns_rx, _write, p2, "200")  # the kernel keeps 256
        rc, out, _ = run_cli(capsys, "host", "export", "--netns", lab.ns_rx, "--dev",
                             lab.dev_rx, "-o", str(path))
        assert rc == 0 and "wrote" in out
    finally:
        in_netns(lab.ns_rx, _write, p1, "0")
        in_netns(lab.ns_rx, _write, p2, "0")
    assert snapshot(lab) == before
    text = path.read_text()
    assert ("# not exported: RSS (ethtool -x): Operation not supported: the driver does not "
            "support ETHTOOL_GRSSH") in text
    sc = load_scenario(str(path))
    assert sc.host.cpus == cpu_count() and sc.nic.queues == 4 and sc.nic.driver == "veth"
    assert sc.kernel.rps_cpus == {0: "0", 1: "2", 2: "0", 3: "0"}
    assert sc.kernel.rps_flow_cnt == {0: 0, 1: 0, 2: 256, 3: 0}
    assert sc.nic.rx_mode == "netif_rx"
    assert sc.kernel.netdev_max_backlog == before["sysctls"]["netdev_max_backlog"]
    from rxlab import simulate

    res = simulate(load_scenario(str(path)), duration=0.01)
    pk = res.data["packets"]
    assert pk["offered"] > 0
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]


def _scenario(lab, tmp_path, **kernel):
    info = read_host(lab.ns_rx, [lab.dev_rx])
    data, _ = scenario_from_host(info, lab.dev_rx)
    data["kernel"].update(kernel)
    p = tmp_path / "apply.yaml"
    p.write_text(yaml.safe_dump(data))
    return p, data


def test_apply_dry_run_then_yes_then_rollback(lab, sysctl_lock, capsys, tmp_path):
    # values on queues that `ethtool -L rx 2` removes: the rollback must bring them back
    p3, p2 = qpath(lab, "rx-3", "rps_cpus"), qpath(lab, "rx-2", "rps_flow_cnt")
    in_netns(lab.ns_rx, _write, p3, "1")
    in_netns(lab.ns_rx, _write, p2, "4096")
    try:
        before = snapshot(lab)
        flow_limit = ({"flow_limit_cpu_bitmap": "2", "flow_limit_table_len": 8192}
                      if FLOW_LIMIT else {})
        path, data = _scenario(lab, tmp_path, rps_cpus={0: "2", 1: "3"},
                               netdev_max_backlog=1234, dev_weight=32,
                               rps_flow_cnt={0: 100}, rps_sock_flow_entries=1000,
                               **flow_limit)
        data["nic"]["queues"] = 2
        path.write_text(yaml.safe_dump(data))
        rc, out, _ = run_cli(capsys, "host", "apply", str(path), "--dev", lab.dev_rx,
                             "--netns", lab.ns_rx)
        assert rc == 0 and "dry run: nothing changed" in out
        assert f"ip netns exec {lab.ns_rx} ethtool -L {lab.dev_rx} rx 2    # now rx 4" in out
        assert f"echo 3 > /sys/class/net/{lab.dev_rx}/queues/rx-1/rps_cpus" in out
        assert f"echo 100 > /sys/class/net/{lab.dev_rx}/queues/rx-0/rps_flow_cnt" in out
        flat = out.replace("\n      # ", "    # ")  # a comment past 80 columns: next line
        assert (f"sysctl -w net.core.rps_sock_flow_entries=1000    # now 0; machine-wide, "
                f"not only netns {lab.ns_rx}\n") in flat
        # the sysctls, not the device's own values
        assert out.count("machine-wide") == 3 + len(flow_limit)
        assert "sysctl -w net.core.netdev_max_backlog=1234" in out
        assert snapshot(lab) == before
        rb = tmp_path / "rollback.json"
        rc, out, _ = run_cli(capsys, "host", "apply", str(path), "--dev", lab.dev_rx,
                             "--netns", lab.ns_rx, "--yes", "--rollback-file", str(rb))
        assert rc == 0 and f"rxlab host rollback {rb}" in out
        now = snapshot(lab)
        assert now["dev"]["rx_queues"] == 2
        assert [q["rps_cpus"] for q in now["dev"]["rx"]] == ["2", "3"]
        assert now["sysctls"]["netdev_max_backlog"] == 1234
        assert now["sysctls"]["dev_weight"] == 32
        if FLOW_LIMIT:
            assert int(now["sysctls"]["flow_limit_cpu_bitmap"], 16) == 2
            assert now["sysctls"]["flow_limit_table_len"] == 8192
        assert [q["rps_flow_cnt"] for q in now["dev"]["rx"]] == [128, 0]  # rounded up
        assert now["sysctls"]["rps_sock_flow_entries"] == 1024
        assert json.loads(rb.read_text())["state"] == "applied"
        rc, out, _ = run_cli(capsys, "host", "rollback", str(rb))
        n = len(json.loads(rb.read_text())["steps"])
        lines = out.splitlines()
        assert rc == 0 and lines[-1] == f"rolled back {rb}: restored {n} of {n} value(s)"
        assert sum(ln.startswith("restored: ") for ln in lines) == n
        assert snapshot(lab) == before
        assert json.loads(rb.read_text())["state"] == "rolled-back"
        assert run_cli(capsys, "host", "rollback", str(rb))[0] == 2  # not twice
    finally:
        in_netns(lab.ns_rx, _write, p3, "0")
        in_netns(lab.ns_rx, _write, p2, "0")


def test_a_failing_step_rolls_everything_back(lab, sysctl_lock, capsys, tmp_path,
                                              monkeypatch):
    before = snapshot(lab)
    path, data = _scenario(lab, tmp_path, rps_cpus="3", netdev_max_backlog=777,
                           netdev_budget=123)
    real_set, calls = host_apply._set, []

    def flaky(step, value, dev, netns):
        calls.append((step.kind, step.target, value))
        if step.kind == "sysctl" and step.target == "netdev_budget" and value == "123":
            real_set(step, "124", dev, netns)  # half-done, then the failure
            raise OSError(5, "injected failure")
        return real_set(step, value, dev, netns)

    monkeypatch.setattr(host_apply, "_set", flaky)
    rb = tmp_path / "rb.json"
    rc, _, err = run_cli(capsys, "host", "apply", str(path), "--dev", lab.dev_rx, "--netns",
                         lab.ns_rx, "--yes", "--rollback-file", str(rb))
    assert rc == 2 and err.count("\n") == 1
    assert "step 6 of 6 failed" in err and "injected failure" in err
    assert "rolled back 6 changes; the host is as before" in err  # the half-done one too
    assert snapshot(lab) == before
    assert json.loads(rb.read_text())["state"] == "rolled-back"
    assert len(calls) == 12  # 6 applied, 6 restored (the failing one too)
    assert host_apply.pending(lab.dev_rx, lab.ns_rx) is None


def test_a_write_refused_before_any_change_is_not_rolled_back(lab, sysctl_lock, capsys,
                                                              tmp_path, monkeypatch):
    # a read-only file: the write fails and the value never changed, so the rollback
    # has nothing to restore there (and must not report it as a failure)
    before = snapshot(lab)
    path, _ = _scenario(lab, tmp_path, rps_cpus="3", netdev_max_backlog=777,
                        netdev_budget=123)
    real_write = host_apply._write_file
    refused = str(SYSCTL_DIR / "netdev_budget")
    tried = []

    def write_file(p, value):
        if p == refused:
            tried.append(value)
            raise PermissionError(13, "Permission denied")
        real_write(p, value)

    monkeypatch.setattr(host_apply, "_write_file", write_file)
    rb = tmp_path / "rb.json"
    rc, _, err = run_cli(capsys, "host", "apply", str(path), "--dev", lab.dev_rx, "--netns",
                         lab.ns_rx, "--yes", "--rollback-file", str(rb))
    assert rc == 2 and err.count("\n") == 1, err
    assert "step 6 of 6 failed" in err and "Permission denied" in err
    assert "rolled back 5 changes; the host is as before" in err
    assert "INCOMPLETE" not in err
    assert tried == ["123"]  # written once, never "restored"
    assert snapshot(lab) == before
    assert json.loads(rb.read_text())["state"] == "rolled-back"


@pytest.mark.skipif(FLOW_LIMIT, reason="this kernel has flow limit (the refusal is shown "
                    "on kernels without CONFIG_NET_FLOW_LIMIT; tests/test_caps.py covers it "
                    "on a fake /proc)")
def test_a_kernel_without_flow_limit_applies_an_export_and_refuses_flow_limit(
        lab, sysctl_lock, capsys, tmp_path):
    before = snapshot(lab)
    exported = tmp_path / "h.yaml"
    rc, out, _ = run_cli(capsys, "host", "export", "--netns", lab.ns_rx, "--dev", lab.dev_rx,
                         "-o", str(exported))
    assert rc == 0
    assert "CONFIG_NET_FLOW_LIMIT" in exported.read_text()  # said in the header
    sc = load_scenario(str(exported))
    assert sc.kernel.flow_limit_cpu_bitmap == "0"  # a scenario that models no flow limit
    for extra in ([], ["--yes", "--rollback-file", str(tmp_path / "rb.json")]):
        rc, out, err = run_cli(capsys, "host", "apply", str(exported), "--dev", lab.dev_rx,
                               "--netns", lab.ns_rx, *extra)
        assert rc == 0, err
        assert snapshot(lab) == before
    data = yaml.safe_load(exported.read_text())
    data["kernel"]["flow_limit_cpu_bitmap"] = "1"
    bad = tmp_path / "fl.yaml"
    bad.write_text(yaml.safe_dump(data))
    rc, out, err = run_cli(capsys, "host", "apply", str(bad), "--dev", lab.dev_rx, "--netns",
                           lab.ns_rx, "--yes", "--rollback-file", str(tmp_path / "rb2.json"))
    assert rc == 2 and err.count("\n") == 1 and "CONFIG_NET_FLOW_LIMIT" in err, err
    assert not (tmp_path / "rb2.json").exists()
    assert snapshot(lab) == before


BAD = [
    ({"dev": "bad/name"}, "bad device name"),
    ({"dev": "nosuch0"}, "no network device 'nosuch0'"),
    ({"netns": "rxlab_no_such_ns"}, "network namespace 'rxlab_no_such_ns' does not exist"),
    ({"kernel": {"rps_cpus": {0: "f0"}}}, "names CPU 7 but this host has"),
    ({"kernel": {"rps_cpus": {9: "1"}}}, "kernel.rps_cpus: queue 9 does not exist"),
    ({"kernel": {"flow_limit_table_len": 1000}}, "is not a power of two"),
    ({"kernel": {"rps_flow_cnt": {4: 64}}}, "kernel.rps_flow_cnt: queue 4 does not exist"),
    ({"kernel": {"rps_sock_flow_entries": 1 << 30}}, "out of range 0..536870912"),
    ({"kernel": {"flow_limit_cpu_bitmap": "100"}}, "names CPU 8"),
    ({"nic": {"queues": 8}}, "nic.queues: 8 exceeds the 4 rx channels"),
    ({"nic": {"rss": {"key": "6d5a" * 20}}}, "veth hashes without a key"),
    ({"nic": {"rss": {"flow_hash": {"udp4": "sdfn"}}}}, "does not support rx-flow-hash"),
    ({"nic": {"irq_affinity": [0, 1, 0, 9]}}, "CPU 9 does not exist"),
]


@pytest.mark.parametrize("bad, message", BAD, ids=[m for _, m in BAD])
def test_bad_configurations_change_nothing(lab, capsys, tmp_path, bad, message):
    before = snapshot(lab)
    path, data = _scenario(lab, tmp_path, netdev_max_backlog=999)
    for sect in ("nic", "kernel"):
        data[sect].update(copy.deepcopy(bad.get(sect, {})))
    if ("irq_affinity" in data["nic"] or "rps_cpus" in bad.get("kernel", {})) and (
            "cpus" in data["host"]):
        data["host"]["cpus"] = 16  # let the scenario itself load
    path.write_text(yaml.safe_dump(data))
    dev = bad.get("dev", lab.dev_rx)
    rc, out, err = run_cli(capsys, "host", "apply", str(path), "--dev", dev, "--netns",
                           bad.get("netns", lab.ns_rx), "--yes", "--rollback-file",
                           str(tmp_path / "rb.json"))
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "rb.json").exists()
    assert snapshot(lab) == before


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=masks(cpu_count()))
def test_masks_round_trip_through_the_kernel(lab, drawn):
    """Plan, write, read back: the kernel's rps_cpus names exactly the drawn CPUs."""
    cpus, text = drawn
    step = host_apply.Step("rps_cpus", "rx-0", "0", host_apply._check_mask(
        text, cpu_count(), "kernel.rps_cpus"))
    try:
        host_apply._write(step, step.new, lab.dev_rx, lab.ns_rx)
        held, got = host_apply._holds(step, step.new, lab.dev_rx, lab.ns_rx)
        assert held and cpuset.parse_mask(got) == sorted(cpus), (text, got)
    finally:
        host_apply._write(step, "0", lab.dev_rx, lab.ns_rx)


def test_top_shows_softnet_and_queue_rates(lab, capsys):
    lab.run(lab.ns_tx, ["ping", "-c", "1", "-W", "1", lab.ip_rx], check=False)
    rc, out, _ = run_cli(capsys, "top", "--netns", lab.ns_rx, "--interval", "0.1",
                         "--count", "2", "--json")
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 2
    r = json.loads(lines[-1])
    cpus = Path("/proc/net/softnet_stat").read_text().strip().splitlines()
    assert [c["cpu"] for c in r["cpus"]] == list(range(len(cpus)))
    assert set(r["cpus"][0]) == {"cpu", "processed", "dropped", "time_squeeze",
                                 "received_rps", "flow_limit_count"}
    assert lab.dev_rx in r["devices"]
    assert set(r["devices"][lab.dev_rx]["stats"]) >= {"rx_packets", "tx_packets"}
    rc, out, _ = run_cli(capsys, "top", "--netns", lab.ns_rx, "--interval", "0.05",
                         "--count", "1")
    assert rc == 0 and "softnet_stat per CPU" in out and lab.dev_rx in out
    assert run_cli(capsys, "top", "--interval", "0")[0] == 2
