"""rxlab kernel-check: the parts that run anywhere (no root, no namespaces).

The real-kernel runs are in test_kcheck_kernel.py (root only, skipped elsewhere).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from rxlab.cli.main import main
from rxlab.host import bpf, guard, procfs
from rxlab.kcheck import checks, model
from rxlab.kcheck.checks import CHECKS, MUTATIONS, Criteria, cpumap_unavailable
from rxlab.kernel.hashfn import reciprocal_scale

SOFTNET_6_18 = (
    "0000000a 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 "
    "00000003 00000004 00000000 00000000 00000000 00000000\n"
    "000000ff 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 "
    "00000010 00000000 00000005 00000002 00000001 00000004\n"
)


def test_softnet_rows_keyed_by_cpu_column():
    sn = procfs.softnet_by_cpu(SOFTNET_6_18)
    assert set(sn) == {0, 2}  # cpu1 offline: no line; rows keyed by column 12
    assert sn[0] == {"processed": 10, "dropped": 1, "time_squeeze": 2, "received_rps": 3,
                     "flow_limit_count": 4}
    assert sn[2]["processed"] == 255 and sn[2]["received_rps"] == 16


def test_softnet_delta_wraps_u32():
    a = {0: {"processed": 0xFFFFFFFE, "dropped": 0}}
    b = {0: {"processed": 3, "dropped": 2}}
    assert procfs.softnet_delta(a, b) == {0: {"processed": 5, "dropped": 2}}


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
    for insns in (bpf.hash_setter_insns(7), bpf.flow_recorder_insns(7),
                  bpf.xdp_cpumap_insns(7, 8), bpf.cpumap_counter_insns(7, False),
                  bpf.cpumap_counter_insns(7, True)):
        assert len(insns) % 8 == 0 and len(insns) // 8 < 100
        last = insns[-8:]
        assert last[0] == 0x95  # exit
        # every jump lands inside the program
        n = len(insns) // 8
        for i in range(n):
            code, _regs, off, _imm = struct.unpack_from("<BBhi", insns, 8 * i)
            if code & 0x07 == 0x05 and code not in (0x85, 0x95):  # BPF_JMP, not call/exit
                assert 0 <= i + 1 + off < n, f"insn {i} jumps outside"


def _jumps(insns: bytes) -> dict[int, tuple[int, int]]:
    """insn index -> (opcode, target index) of every conditional/unconditional jump."""
    out = {}
    for i in range(len(insns) // 8):
        code, _regs, off, _imm = struct.unpack_from("<BBhi", insns, 8 * i)
        if code & 0x07 == 0x05 and code not in (0x85, 0x95):
            out[i] = (code, i + 1 + off)
    return out


def test_xdp_program_passes_on_every_parse_failure_and_redirects_on_a_hit():
    insns = bpf.xdp_cpumap_insns(7, 8)
    n = len(insns) // 8
    # the last two instructions: r0 = XDP_PASS; exit
    assert insns[-16:-8] == bpf.mov64_imm(bpf.R0, bpf.XDP_PASS) and insns[-8:] == bpf.exit_()
    jumps = _jumps(insns)
    assert len(jumps) == 5 and {t for _c, t in jumps.values()} == {n - 2}
    # bounds check first (jgt reg), then the three header tests, then the map miss
    assert [c for _i, (c, _t) in sorted(jumps.items())] == [0x2D, 0x55, 0x55, 0x55, 0x15]
    calls = [struct.unpack_from("<i", insns, 8 * i + 4)[0] for i in range(n)
             if insns[8 * i] == 0x85]
    assert calls == [bpf.FN_MAP_LOOKUP, bpf.FN_REDIRECT_MAP]
    # both map loads are BPF_PSEUDO_MAP_FD ld_imm64 with our fds
    fds = [struct.unpack_from("<i", insns, 8 * i + 4)[0] for i in range(n)
           if insns[8 * i] == 0x18]
    assert fds == [7, 8]


def test_cpumap_counter_slots():
    items = [(struct.pack("<I", 1), struct.pack("<QQ", 100, 7)),
             (struct.pack("<I", 9), struct.pack("<QQ", 93, 0)),
             (struct.pack("<I", 0), struct.pack("<QQ", 0, 0))]
    assert bpf.parse_cpumap_stats(items) == {
        "enqueue": {1: {"processed": 100, "drops": 7}},
        "kthread": {1: {"processed": 93, "drops": 0}}}
    enq, kth = bpf.cpumap_counter_insns(5, False), bpf.cpumap_counter_insns(5, True)
    assert bpf.ldx("dw", bpf.R2, bpf.R6, 24) in enq  # args[3] = to_cpu
    assert bpf.call(bpf.FN_CPU) in kth and bpf.add64_imm(bpf.R2, 8) in kth
    assert enq.count(bytes([0xDB])) >= 2  # two atomic adds


def test_xdp_link_message():
    msg = bpf.xdp_link_msg(4, 11)
    length, typ, flags = struct.unpack_from("<IHH", msg, 0)
    assert length == len(msg) and typ == bpf.RTM_SETLINK and flags & bpf.NLM_F_ACK
    _fam, _pad, _type, ifindex, _fl, _chg = struct.unpack_from("<BBHiII", msg, 16)
    assert ifindex == 4
    nla_len, nla_type = struct.unpack_from("<HH", msg, 32)
    assert nla_type == bpf.IFLA_XDP | bpf.NLA_F_NESTED and nla_len == len(msg) - 32
    assert struct.unpack_from("<HHi", msg, 36) == (8, bpf.IFLA_XDP_FD, 11)
    assert struct.unpack_from("<HHI", msg, 44) == (8, bpf.IFLA_XDP_FLAGS,
                                                   bpf.XDP_FLAGS_DRV_MODE)
    assert struct.unpack_from("<i", bpf.xdp_link_msg(4, -1), 40)[0] == -1  # detach


def test_recorders_hand_packets_on():
    # TC_ACT_UNSPEC: the next filter (the u32 slowdown, the hash setter) still runs
    for insns in (bpf.hash_setter_insns(7), bpf.flow_recorder_insns(7)):
        assert insns[-16:] == bpf.mov64_imm(bpf.R0, -1) + bpf.exit_()


PROC_NET_UDP = (
    "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode ref pointer drops\n"
    " 1: 0200000A:2328 0100000A:9D6C 01 00000000:00F9A000 00:00000000 00000000     0     "
    "   0 123 2 0000000000000000 88819\n"
    " 2: 0200000A:2328 0100000A:9D6D 01 00000000:00000000 00:00000000 00000000     0     "
    "   0 124 2 0000000000000000 0\n"
    " 3: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0     "
    "   0 125 2 0000000000000000 5\n")
SNMP = ("Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors "
        "InCsumErrors IgnoredMulti MemErrors\n"
        "Udp: 61333 0 88819 1 88819 0 0 0 0\n")


def test_udp_socket_counters():
    assert procfs.parse_proc_udp(PROC_NET_UDP) == {
        40300: {"drops": 88819, "rx_queue": 0xF9A000}, 40301: {"drops": 0, "rx_queue": 0}}
    assert procfs.parse_snmp_udp(SNMP) == {"InDatagrams": 61333, "InErrors": 88819,
                                         "RcvbufErrors": 88819, "InCsumErrors": 0,
                                         "NoPorts": 0}


def test_offload_features_leave_fixed_ones_out():
    text = ("Features for rxkc0:\nrx-checksumming: on\ntx-checksumming: off\n"
            "\ttx-checksum-ipv4: off [fixed]\n\ttx-checksum-ip-generic: off\n"
            "\ttx-tcp-segmentation: off [requested on]\nhighdma: on\n")
    assert procfs.parse_offload(text) == {"rx-checksumming": "on", "tx-checksumming": "off",
                                        "tx-checksum-ip-generic": "off",
                                        "tx-tcp-segmentation": "off", "highdma": "on"}


def test_cpumap_model_scenario_and_rule():
    ports = checks.CPUMAP_PORTS
    d = model.cpumap_scenario([model.group("f", ports, 1000)], checks.CPUMAP_REDIRECT,
                              [0, 1], rps_cpus="3")
    assert d["nic"]["rx_mode"] == "napi" and d["xdp"]["hash_metadata"] is False
    assert d["kernel"]["rps_cpus"] == {0: "3"} and d["cpumap"]["cpus"] == "0,1"
    got = {p: model.cpumap_rule_cpu(d, p) for p in ports}
    assert got == {p: checks.CPUMAP_REDIRECT.get(p, 0) for p in ports}
    model.to_scenario(d)  # the simulator's schema accepts it


def test_tc_filter_message():
    msg = bpf.tc_filter_msg(5, "ingress", 9, "rxkc_record")
    length, typ, flags = struct.unpack_from("<IHH", msg, 0)
    assert length == len(msg) and typ == bpf.RTM_NEWTFILTER
    assert flags & bpf.NLM_F_CREATE and flags & bpf.NLM_F_ACK
    _fam, _p1, _p2, ifindex, handle, parent, info = struct.unpack_from("<BBHiIII", msg, 16)
    assert (ifindex, handle, parent) == (5, 0, 0xFFFFFFF2)
    assert info >> 16 == 1 and info & 0xFFFF == 0x0300  # prio 1, htons(ETH_P_ALL)
    assert b"bpf\0" in msg and b"rxkc_record\0" in msg
    assert bpf.tc_filter_msg(5, "ingress", 9, "x", prio=1000)[32:36] == struct.pack(
        "<I", (1000 << 16) | 0x0300)


def test_sysctl_guard_restores_only_what_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(guard, "CORE", str(tmp_path))
    for name, val in (("netdev_max_backlog", "1000"), ("flow_limit_cpu_bitmap", "0"),
                      ("rps_sock_flow_entries", "0")):
        (tmp_path / name).write_text(val + "\n")
    g = guard.Sysctls()
    g.set("netdev_max_backlog", 64)
    g.set("flow_limit_cpu_bitmap", "1")
    assert (tmp_path / "netdev_max_backlog").read_text() == "64\n"
    assert g.restore() == []
    assert guard.read_sysctl("netdev_max_backlog") == "1000"
    assert guard.read_sysctl("flow_limit_cpu_bitmap") == "0"
    with pytest.raises(ValueError):
        guard.write_sysctl("netdev_budget", 1)  # not one kernel-check may write


def test_leftover_state_is_repaired(tmp_path, monkeypatch):
    monkeypatch.setattr(guard, "CORE", str(tmp_path))
    monkeypatch.setattr(guard, "STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(guard, "STATE_FILE", str(tmp_path / "state" / "state.json"))
    monkeypatch.setattr(guard, "NETNS_RUN_DIR", str(tmp_path / "netns"))  # none of ours exist
    (tmp_path / "netdev_max_backlog").write_text("64\n")  # a killed run left this
    guard.save_state({"netdev_max_backlog": "1000"})
    notes = guard.repair_leftovers()
    assert guard.read_sysctl("netdev_max_backlog") == "1000"
    assert any("netdev_max_backlog" in n for n in notes)
    assert not (tmp_path / "state" / "state.json").exists()


def test_criteria_agree_only_when_all_hold():
    c = Criteria()
    c.add("a", True, 1, 1)
    c.add("b", False, [0], [1])
    r = c.result("x", {}, {})
    assert r["agree"] is False and r["status"] == "ran" and "b" in r["reason"]
    assert set(r) >= {"name", "status", "agree", "kernel", "model", "reason"}


def test_every_mutation_names_a_check(monkeypatch):
    assert set(MUTATIONS.values()) <= set(CHECKS)
    assert all(callable(fn) for fn in CHECKS.values())
    monkeypatch.setattr(checks.shutil, "which", lambda _t: None)
    assert "ethtool" in cpumap_unavailable()


def test_cannot_run_without_root(monkeypatch, capsys):
    monkeypatch.setattr(guard.os, "geteuid", lambda: 1000)
    assert guard.cannot_run().startswith("needs root")
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


def test_paced_sender_reports_its_sleeps_and_a_napping_receiver_reads_everything():
    from rxlab.host.experiment import TRAFFIC
    lo, ports = "127.0.0.1", "47311,47312"
    recv = subprocess.Popen([sys.executable, "-S", TRAFFIC, "recv", "--cpu", "0", "--addr",
                             lo, "--peer", lo, "--port", "47310", "--sports", ports,
                             "--nap", "0.001", "--max-seconds", "10"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().strip() == "ready"
        snd = subprocess.run([sys.executable, "-S", TRAFFIC, "send", "--cpu", "0", "--src",
                              lo, "--dst", lo, "--port", "47310", "--sports", ports,
                              "--duration", "0.2", "--pps", "5000"],
                             capture_output=True, text=True, check=True, timeout=10)
        out, _ = recv.communicate("", timeout=10)
    finally:
        recv.kill()
    sent = json.loads(snd.stdout.splitlines()[-1])
    got = json.loads(out.splitlines()[-1])
    assert sum(sent["sent"].values()) > 500
    assert got["received"] == sent["sent"]  # read on its timer, EOF on stdin still ends it
    # paced: it slept many times, for most of the time it sent
    assert sent["sleeps"] > 20 and 0.3 * sent["seconds"] < sent["slept"] < sent["seconds"]
    assert got["rusage"]["nvcsw"] > 20  # it slept between reads
