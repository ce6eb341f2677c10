"""rxlab kernel-check: the parts that run anywhere (no root, no namespaces).

The real-kernel runs are in test_kcheck_kernel.py (root only, skipped elsewhere).
"""

from __future__ import annotations

import json
import struct

import pytest

from rxlab.cli.main import main
from rxlab.kcheck import bpf, host, model
from rxlab.kcheck.checks import CHECKS, MUTATIONS, Criteria, cpumap_unavailable
from rxlab.kernel.hashfn import reciprocal_scale

SOFTNET_6_18 = (
    "0000000a 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 "
    "00000003 00000004 00000000 00000000 00000000 00000000\n"
    "000000ff 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 "
    "00000010 00000000 00000005 00000002 00000001 00000004\n"
)


def test_softnet_rows_keyed_by_cpu_column():
    sn = host.parse_softnet(SOFTNET_6_18)
    assert set(sn) == {0, 2}  # cpu1 offline: no line; rows keyed by column 12
    assert sn[0] == {"processed": 10, "dropped": 1, "time_squeeze": 2, "received_rps": 3,
                     "flow_limit_count": 4}
    assert sn[2]["processed"] == 255 and sn[2]["received_rps"] == 16


def test_softnet_delta_wraps_u32():
    a = {0: {"processed": 0xFFFFFFFE, "dropped": 0}}
    b = {0: {"processed": 3, "dropped": 2}}
    assert host.softnet_delta(a, b) == {0: {"processed": 5, "dropped": 2}}


@pytest.mark.parametrize("h", [0x00000001, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x9FA7F6C3])
def test_model_rps_rule_is_reciprocal_scale(h):
    cpus = [0, 1]
    assert model.rps_cpu(h, cpus) == cpus[int(reciprocal_scale(h, 2))] == h >> 31
    assert model.rps_cpu(h, [2, 5, 7]) == [2, 5, 7][(h * 3) >> 32]


def test_wrong_rule_differs_for_some_hashes():
    hs = [0x00000001, 0x80000000, 0x40000003, 0xC0000002]
    right = [model.rps_cpu(h, [0, 1]) for h in hs]
    wrong = [model.rps_cpu(h, [0, 1], low_bits=True) for h in hs]
    assert right == [0, 1, 0, 1] and wrong == [1, 0, 1, 0]


def test_port_key_and_record_layout():
    key = bpf.port_key(40001, 1)
    assert key == b"\x9c\x41\x01\x00"  # port in network order, cpu little-endian
    value = struct.pack("<IIQ", 0xDEADBEEF, 2, 12345)
    assert bpf.parse_record(key, value) == (40001, 1, 0xDEADBEEF, 2, 12345)


def test_programs_assemble_to_whole_instructions():
    for insns in (bpf.hash_setter_insns(7), bpf.flow_recorder_insns(7)):
        assert len(insns) % 8 == 0 and len(insns) // 8 < 100
        last = insns[-8:]
        assert last[0] == 0x95  # exit
        # every jump lands inside the program
        n = len(insns) // 8
        for i in range(n):
            code, _regs, off, _imm = struct.unpack_from("<BBhi", insns, 8 * i)
            if code & 0x07 == 0x05 and code not in (0x85, 0x95):  # BPF_JMP, not call/exit
                assert 0 <= i + 1 + off < n, f"insn {i} jumps outside"


def test_tc_filter_message():
    msg = bpf.tc_filter_msg(5, "ingress", 9, "rxkc_record")
    length, typ, flags = struct.unpack_from("<IHH", msg, 0)
    assert length == len(msg) and typ == bpf.RTM_NEWTFILTER
    assert flags & bpf.NLM_F_CREATE and flags & bpf.NLM_F_ACK
    _fam, _p1, _p2, ifindex, handle, parent, info = struct.unpack_from("<BBHiIII", msg, 16)
    assert (ifindex, handle, parent) == (5, 0, 0xFFFFFFF2)
    assert info >> 16 == 1 and info & 0xFFFF == 0x0300  # prio 1, htons(ETH_P_ALL)
    assert b"bpf\0" in msg and b"rxkc_record\0" in msg


def test_sysctl_guard_restores_only_what_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "CORE", str(tmp_path))
    for name, val in (("netdev_max_backlog", "1000"), ("flow_limit_cpu_bitmap", "0"),
                      ("rps_sock_flow_entries", "0")):
        (tmp_path / name).write_text(val + "\n")
    g = host.Sysctls()
    g.set("netdev_max_backlog", 64)
    g.set("flow_limit_cpu_bitmap", "1")
    assert (tmp_path / "netdev_max_backlog").read_text() == "64\n"
    assert g.restore() == []
    assert host.read_sysctl("netdev_max_backlog") == "1000"
    assert host.read_sysctl("flow_limit_cpu_bitmap") == "0"
    with pytest.raises(ValueError):
        host.write_sysctl("netdev_budget", 1)  # not one kernel-check may write


def test_leftover_state_is_repaired(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "CORE", str(tmp_path))
    monkeypatch.setattr(host, "STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(host, "STATE_FILE", str(tmp_path / "state" / "state.json"))
    monkeypatch.setattr(host, "NETNS_DIR", str(tmp_path / "netns"))  # none of ours exist
    (tmp_path / "netdev_max_backlog").write_text("64\n")  # a killed run left this
    host.save_state({"netdev_max_backlog": "1000"})
    notes = host.repair_leftovers()
    assert host.read_sysctl("netdev_max_backlog") == "1000"
    assert any("netdev_max_backlog" in n for n in notes)
    assert not (tmp_path / "state" / "state.json").exists()


def test_criteria_agree_only_when_all_hold():
    c = Criteria()
    c.add("a", True, 1, 1)
    c.add("b", False, [0], [1])
    r = c.result("x", {}, {})
    assert r["agree"] is False and r["status"] == "ran" and "b" in r["reason"]
    assert set(r) >= {"name", "status", "agree", "kernel", "model", "reason"}


def test_every_mutation_names_a_check():
    assert set(MUTATIONS.values()) <= set(CHECKS)
    assert "cpumap" in cpumap_unavailable()


def test_cannot_run_without_root(monkeypatch, capsys):
    monkeypatch.setattr(host.os, "geteuid", lambda: 1000)
    assert host.cannot_run().startswith("needs root")
    assert main(["kernel-check", "--quiet"]) == 77
    assert capsys.readouterr().out.strip().startswith("cannot run here: needs root")
    assert main(["kernel-check", "--json", "--quiet"]) == 77
    out = json.loads(capsys.readouterr().out)
    assert out["checks"] == [] and out["cannot_run"].startswith("needs root")


@pytest.mark.parametrize("argv", [["--only", "nope"], ["--mutate", "nope"],
                                  ["--duration", "60"]])
def test_bad_arguments(argv, capsys):
    assert main(["kernel-check", *argv]) == 2
    assert "error" in capsys.readouterr().err


def test_model_hashes_are_the_simulators_flow_hashes():
    ports = list(range(40000, 40004))
    d = model.scenario([model.group("f", ports, 1000)], {"rps_cpus": "3"}, duration=0.01)
    hs = model.flow_hashes(d)
    assert sorted(hs) == ports and len(set(hs.values())) == 4
    assert all(0 < h < 1 << 32 for h in hs.values())
    assert model.flow_hashes(d) == hs  # fixed hashrnd: the same every time
