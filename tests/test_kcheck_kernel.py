"""rxlab kernel-check against the real kernel (root, initial network namespace).

Each test runs ``rxlab kernel-check`` as a subprocess (it needs root and the host namespace); exit
status 77 or a failed preflight skips with the reason. The first model load in a fresh
process reads the numba cache (or compiles, minutes, on a machine that never ran it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.lab_processes import traffic_processes

from rxlab.host import caps, guard
from rxlab.host.lab import KCHECK_NAMES
from rxlab.host.netns import NETNS_RUN_DIR

WHY = guard.cannot_run()
FLOW_LIMIT = caps.probe().has("flow_limit")  # else flow_limit_shedding is skipped
# a slowed-consumer check (netdev_max_backlog 64): the one flow limit's, or its twin
SLOW_CHECK = "flow_limit_shedding" if FLOW_LIMIT else "backlog_drop_accounting"
# irq_deferral counts NET_RX runs per packet of a sender paced to one packet a wake-up:
# a loaded machine that wakes it late sends two at once, which the even spacing of the
# model's arrivals does not have (docs/kernel-check.md)
# busy_read times the reader's CPU per packet: another process on cpu1 preempts its
# busy loop (need_resched), so its verdict is printed too
UNGATED = {"reader_on_rps_cpu", "reader_threaded_napi", "ksoftirqd_share", "irq_deferral",
           "busy_read"}
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"cannot run here: {WHY}")
RXLAB = [sys.executable, "-m", "rxlab.cli.main", "kernel-check"]
COMPILE_BUDGET = 900  # s: a cold numba cache on a busy 2-CPU machine


def _state() -> dict:
    return {"sysctls": {n: guard.read_sysctl(n) for n in guard.SYSCTLS
                        if os.path.exists(os.path.join(guard.CORE, n))},
            "namespaces": sorted(n for n in (KCHECK_NAMES["ns_tx"], KCHECK_NAMES["ns_rx"])
                                 if os.path.exists(os.path.join(NETNS_RUN_DIR, n)))}


def _run(*args: str) -> tuple[int, dict]:
    p = subprocess.run([*RXLAB, "--json", "--quiet", *args], capture_output=True, text=True,
                       timeout=COMPILE_BUDGET + 300, stdin=subprocess.DEVNULL)
    if p.returncode == 77:
        pytest.skip(p.stderr.strip() or "cannot run here")
    assert p.returncode in (0, 1), p.stderr[-2000:]
    return p.returncode, json.loads(p.stdout)


@pytest.fixture
def untouched():
    """The host must look the same afterwards: sysctls, no namespaces of ours."""
    before = _state()
    assert before["namespaces"] == [], "left-over kernel-check namespaces before the test"
    yield before
    assert _state() == before
    assert not os.path.exists(guard.STATE_FILE)


def test_every_check_agrees_with_the_kernel(untouched, capsys):
    t = time.monotonic()
    rc, rep = _run()
    by = {c["name"]: c for c in rep["checks"]}
    ran = [c for c in rep["checks"] if c["status"] == "ran"]
    assert {c["name"] for c in ran} >= {"rps_cpu_choice", "rps_flow_stickiness",
                                        "rfs_follows_thread", "backlog_drop_accounting",
                                        *(["flow_limit_shedding"] if FLOW_LIMIT else [])}
    if not FLOW_LIMIT:  # skipped with the cause, in the checks and in "skipped"
        why = caps.probe().why_not("flow_limit")
        assert by["flow_limit_shedding"]["status"] == "skipped"
        assert by["flow_limit_shedding"]["reason"] == f"flow_limit: {why}"
        assert "CONFIG_NET_FLOW_LIMIT" in why
        assert {"name": "flow_limit_shedding", "reason": f"flow_limit: {why}"} in rep["skipped"]
    with capsys.disabled():  # into the test log (CI's output), passed or not
        print("\nkernel-check: " + "; ".join(
            f"{c['name']} {'agree' if c['agree'] else 'DISAGREE'}" for c in ran))
        for c in ran:
            if c["name"] in UNGATED:
                print(f"  {c['name']}: {c['reason']}; kernel {c['kernel']}; "
                      f"model {c['model']}")
    # the reader checks measure cpu1's whole time: another process on cpu1 moves them
    # (docs/kernel-check.md), so its verdict is printed, and its plumbing gated
    bad = {c["name"]: c["reason"] for c in ran
           if not c["agree"] and c["name"] not in UNGATED}
    assert not bad, bad
    for c in ran:
        if c["name"] == "reader_on_rps_cpu":
            assert len(c["criteria"]) == 3 and c["model"]["reader_cpu1"]["socket_drops"] > 0
        if c["name"] == "reader_threaded_napi":  # the kthreads existed and ran on cpu1
            assert len(c["criteria"]) == 2 and c["model"]["calibration"]["reader_sys_ns"] > 0
            assert c["kernel"]["reader_cpu1"]["napi_thread_cpu"] > 0
        if c["name"] == "irq_deferral":  # four settings written; NAPI ran per packet
            assert len(c["criteria"]) == 4
            assert c["kernel"]["defer0_0us"]["net_rx_per_packet"] >= 0.9
            assert c["kernel"]["defer0_0us"]["received"] > 0
        if c["name"] == "busy_read":  # three runs; the kernel's reader polled itself
            assert len(c["criteria"]) == 5
            assert c["kernel"]["busy_poll_0us"]["busy_poll_share"] == 0
            assert c["kernel"]["busy_poll_5000us"]["busy_poll_share"] > 0.5
        if c["name"] == "ksoftirqd_share":  # ksoftirqd/1's ticks were read
            assert len(c["criteria"]) == 1 and c["kernel"]["cpu1_softirq_ticks"] > 0
    # exit 1 when any check disagrees, a printed (ungated) one included
    assert rc == (0 if all(c["agree"] for c in ran) else 1)
    for c in rep["checks"]:
        assert set(c) >= {"name", "status", "agree", "kernel", "model", "reason"}
        assert c["status"] in ("ran", "skipped")
    # bit-exact per flow: the forced hash arrived and RPS chose the model's CPU
    flows = by["rps_cpu_choice"]["kernel"]["flows"]
    mflows = by["rps_cpu_choice"]["model"]["flows"]
    assert len(flows) == 16
    assert all(flows[p]["hash"] == mflows[p]["hash"] for p in flows)
    assert all(flows[p]["cpu"] == mflows[p]["cpu"] == mflows[p]["simulated_cpu"]
               for p in flows)
    if FLOW_LIMIT:
        # flow limit, compared where it acts: what entered the receive path (sender's tc
        # egress) and what got past the backlog (receiver's tc ingress after the u32
        # filters)
        fl = by["flow_limit_shedding"]["kernel"]
        assert all(fl[x]["entered_equals_sent"]
                   for x in ("off", "enqueuing_cpu0", "target_cpu1"))
        assert abs(fl["off"]["heavy_share"] - fl["off"]["heavy_entered_share"]) <= 0.1
        assert fl["enqueuing_cpu0"]["heavy_share"] < fl["off"]["heavy_share"] - 0.15
        # the starved receiving process is reported (its socket buffer drops the excess)
        assert set(fl["off"]["socket_rcvbuf_drops"]) == {"40300", "40301", "40302", "40303"}
    cm = by["cpumap_cpu_choice"]
    if cm["status"] == "skipped":
        assert cm["reason"]
    else:  # every flow on the cpumap CPU its rule names, no hash after the hop
        for p, f in cm["kernel"]["cpumap"]["flows"].items():
            want = f["redirect"] if f["redirect"] != "pass" else 0
            assert (f["cpu"], f["share"]) == (want, 1.0), (p, f)
            assert (f["hash"] == "00000000") == (f["redirect"] != "pass"), (p, f)
    assert time.monotonic() - t < COMPILE_BUDGET + 120


def test_wrong_model_settings_make_their_checks_disagree(untouched):
    slow_mutation = "flow_limit_on_target" if FLOW_LIMIT else "no_backlog_limit"
    rc, rep = _run("--only", f"{SLOW_CHECK},rps_cpu_choice,cpumap_cpu_choice,irq_deferral,"
                   "busy_read", "--mutate", f"{slow_mutation},rps_low_bits,cpumap_ignored,"
                   "deferral_ignored,busy_poll_ignored")
    assert rc == 1
    by = {c["name"]: c for c in rep["checks"]}
    fl = by[SLOW_CHECK]
    assert fl["agree"] is False
    if FLOW_LIMIT:
        failed = {c["what"] for c in fl["criteria"] if not c["ok"]}
        assert "flow_limit_count lands on the enqueuing CPU" in failed
        assert "bitmap on the enqueuing CPU: heavy share falls by > 0.15" in failed
        # the kernel still did what it does: the count rose on cpu0 only
        assert int(fl["kernel"]["enqueuing_cpu0"]["flow_limit_count"]["0"]) > 0
        assert fl["model"]["enqueuing_cpu0"]["bitmap"] == "2"
    rps = by["rps_cpu_choice"]
    assert rps["agree"] is False
    assert any(c["what"].startswith("each flow on the model's CPU") and not c["ok"]
               for c in rps["criteria"])
    cm = by["cpumap_cpu_choice"]
    if cm["status"] == "ran":
        assert cm["agree"] is False
        failed = {c["what"] for c in cm["criteria"] if not c["ok"]}
        assert any(w.startswith("each flow entirely on the cpumap CPU") for w in failed)
    dfr = by["irq_deferral"]
    if dfr["status"] == "ran":  # a model without deferral: one NET_RX run per packet
        assert dfr["agree"] is False
        assert {c["what"] for c in dfr["criteria"] if not c["ok"]} >= {
            "defer2_200us: NET_RX runs per packet within 15 %"}
    bp = by["busy_read"]
    if bp["status"] == "ran":  # a model whose reader never busy-polls
        assert bp["agree"] is False
        assert bp["model"]["busy_poll_5000us"]["busy_poll_share"] == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_nothing_behind(untouched, sig):
    # SIG_DFL: a shell starts background jobs with SIGINT ignored and exec keeps that;
    # this test needs the child to take Ctrl-C however the suite itself was started
    p = subprocess.Popen([*RXLAB, "--only", SLOW_CHECK, "--duration", "2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # wait until it is mid-experiment: namespaces up and the backlog sysctl written
        deadline = time.monotonic() + COMPILE_BUDGET
        while time.monotonic() < deadline and p.poll() is None:
            if (os.path.exists(os.path.join(NETNS_RUN_DIR, KCHECK_NAMES["ns_rx"]))
                    and guard.read_sysctl("netdev_max_backlog") == "64"):
                break
            time.sleep(0.05)
        assert p.poll() is None, p.stderr.read()[-2000:]
        time.sleep(0.5)  # traffic is flowing now
        p.send_signal(sig)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == (130 if sig == signal.SIGINT else 128 + sig), p.stderr.read()[-2000:]
    assert traffic_processes() == []  # no sender or receiver of ours left running


