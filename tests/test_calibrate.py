"""rxlab calibrate, the rate checks' profile handling and host export's HZ and flows:
the parts that run anywhere (no namespaces). Real-kernel runs: test_calibrate_kernel.py.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from scipy import stats

from rxlab.calibrate import measure, profile
from rxlab.calibrate.measure import Plan
from rxlab.cli.main import main
from rxlab.errors import UsageError
from rxlab.host import export, fit, guard, procfs
from rxlab.kcheck import rates
from rxlab.profiles import load_profile
from rxlab.scenario import scenario_from_dict


def test_least_squares_matches_scipy():
    rng = np.random.default_rng(7)
    x = rng.uniform(1e4, 1e5, 40)
    y = 3e6 + 650.0 * x + rng.normal(0, 2e6, 40)
    got = fit.ols({"one": [1.0] * 40, "x": list(x)}, list(y))
    ref = stats.linregress(x, y)
    assert got["coef"]["x"] == pytest.approx(ref.slope, rel=1e-9)
    assert got["coef"]["one"] == pytest.approx(ref.intercept, rel=1e-9)
    assert got["se"]["x"] == pytest.approx(ref.stderr, rel=1e-9)
    assert got["se"]["one"] == pytest.approx(ref.intercept_stderr, rel=1e-9)
    assert got["r2"] == pytest.approx(ref.rvalue ** 2, rel=1e-9)
    with pytest.raises(ValueError):
        fit.ols({"a": [1.0], "b": [2.0]}, [1.0])  # fewer runs than parameters


def test_agreement_band_is_the_kernel_range_widened_by_the_tolerance():
    k = fit.spread([90.0, 100.0, 110.0])
    assert k["mean"] == 100.0 and k["min"] == 90.0 and k["max"] == 110.0
    assert fit.within(121.9, k, 0.12) and not fit.within(122.1, k, 0.12)
    assert fit.within(78.1, k, 0.12) and not fit.within(77.9, k, 0.12)


def test_proc_stat_rows_add_up_to_the_kernels_total():
    with open("/proc/stat") as fh:
        text = fh.read()
    rows = procfs.parse_proc_stat(text)
    all_cpus = rows.pop("all")  # the "cpu" line
    total = [all_cpus[f] for f in procfs.PROC_STAT_FIELDS]
    assert total == [int(x) for x in text.splitlines()[0].split()[1:9]]
    assert set(rows) >= set(range(len(os.sched_getaffinity(0)))) - {None}
    for i, name in enumerate(procfs.PROC_STAT_FIELDS):
        # the kernel sums the same per-CPU counters; both readings are of one instant
        assert abs(sum(r[name] for r in rows.values()) - total[i]) <= len(rows)


def _own_address() -> str | None:
    """A non-loopback IPv4 address of this host (no packet is sent)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route's source
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ipaddress.ip_address(addr).is_loopback else addr


def test_socket_flows_are_the_kernels_own_connections():
    addr = _own_address()
    if addr is None:
        pytest.skip("no non-loopback IPv4 address")
    srv = socket.socket()
    srv.bind((addr, 0))
    srv.listen()
    cli = socket.create_connection(srv.getsockname())
    acc, _ = srv.accept()
    u_listen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u_listen.bind((addr, 0))
    u_conn = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u_conn.bind((addr, 0))
    u_conn.connect(u_listen.getsockname())
    try:
        flows, listeners = export.socket_flows()
        # each end receives from its peer: src = peer, dst = itself
        want = {("tcp", *acc.getpeername(), *acc.getsockname()),
                ("tcp", *cli.getpeername(), *cli.getsockname()),
                ("udp", *u_conn.getpeername(), *u_conn.getsockname())}
        got = {(f["proto"], f["src"], f["sport"], f["dst"], f["dport"]) for f in flows}
        assert want <= got
        assert u_listen.getsockname()[1] in listeners
        assert not any(ipaddress.ip_address(f["src"]).is_loopback for f in flows)
    finally:
        for s in (cli, acc, srv, u_listen, u_conn):
            s.close()


def test_ipv6_and_mapped_addresses_from_proc():
    line = ("  0: 00000000000000000000000001000000:1F90 0000000000000000FFFF00000100007F:"
            "D431 01 00000000:00000000 00:00000000 00000000 0 0 1 1\n")
    flows, _ = export.parse_proc_net("header\n" + line, "tcp6", 6)
    assert flows == [{"proto": "tcp", "src": "127.0.0.1", "sport": 0xD431, "dst": "::1",
                      "dport": 8080}]


def test_exported_flows_and_hz_load_as_a_scenario(tmp_path):
    flows = [{"proto": "udp", "src": "198.51.100.7", "sport": 5353, "dst": "192.0.2.1",
              "dport": 9000},
             {"proto": "tcp", "src": "2001:db8::1", "sport": 40000, "dst": "2001:db8::2",
              "dport": 443}]
    data = {"name": "x", "host": {"cpus": 2}, "nic": {"queues": 1},
            "traffic": export.DEFAULT_TRAFFIC, "apps": [{"name": "a", "cpus": "0-1"}]}
    notes: list[str] = []
    export.host_fields(data, notes, hz={"hz": 250, "source": "test"}, profile=None,
                       flows=flows, listeners=[53], total_pps=1000)
    sc = scenario_from_dict(data, "export")
    assert sc.host.hz == 250
    groups = data["traffic"]["groups"]
    assert [(g["src"]["addr"], g["sport"]["value"], g["dst"]["addr"], g["dport"]["value"])
            for g in groups] == [(f["src"], f["sport"], f["dst"], f["dport"]) for f in flows]
    assert sum(g["rate"]["pps"] for g in groups) == pytest.approx(1000)
    assert any("53" in n for n in notes)
    with pytest.raises(UsageError, match="--pcap"):
        export.host_fields(data, [], hz=None, profile=None, pcap=str(tmp_path))
    cap = tmp_path / "c.pcap"
    cap.write_bytes(b"")
    export.host_fields(data, [], hz=None, profile=None, pcap=str(cap))
    assert data["traffic"] == {"pcap": {"file": str(cap)}}
    with pytest.raises(UsageError, match="--profile"):
        export.host_fields(data, [], hz=None, profile=str(cap))


def test_hz_from_the_kernel_config(tmp_path, monkeypatch):
    monkeypatch.setattr(export.platform, "release", lambda: "9.9.9-test")
    (tmp_path / "config-9.9.9-test").write_text("CONFIG_HZ_300=y\nCONFIG_HZ=300\n")
    assert export.kernel_hz(str(tmp_path)) == {
        "hz": 300, "source": str(tmp_path / "config-9.9.9-test")}


def test_hz_agrees_with_the_jiffies_clock():
    got = export.kernel_hz("/nonexistent")
    j0 = export._timer_list_jiffies()
    if got is None or j0 is None:
        pytest.skip("neither a kernel config nor /proc/timer_list here")
    import time
    t0 = time.monotonic()
    time.sleep(0.4)
    rate = (export._timer_list_jiffies() - j0) / (time.monotonic() - t0)
    assert abs(rate - got["hz"]) < 0.1 * got["hz"]


def _points(c0: float, b: float, seed: int = 1) -> list[dict]:
    """Runs as measure.point makes them, from a known cost line plus noise."""
    rng = np.random.default_rng(seed)
    out = []
    for n in Plan().filters:
        for pps in (20e3, 40e3, 60e3) * 3:
            proc = int(pps * 0.5)
            soft = (c0 + b * n) * proc * rng.normal(1, 0.03)
            out.append({"filters": n, "pps_target": pps, "sent": proc, "send_seconds": 0.5,
                        "window_s": 0.9, "processed": proc, "dropped": 0, "ipis": 0,
                        "softirq_ns": soft, "softirq_runs": proc // 50,
                        "softirq_ns_cpu0": 0.0, "softirq_ticks_ns": soft,
                        "busy_ns_cpu1": soft, "softirq_ticks_ns_cpu0": 0.0, "received": proc,
                        "recv_stime_ns": 300.0 * proc * rng.normal(1, 0.02),
                        "recv_utime_ns": 0.0, "send_stime_ns": 900.0 * proc,
                        "send_sleeps": 0, "send_slept_s": 0.0, "recv_wakeups": 0})
    return out


def test_profile_from_runs_is_a_valid_cost_profile_that_reproduces_the_fit(tmp_path):
    meas = {"pilots": [], "points": _points(600.0, 5.0), "background_ns_per_s": 0.0}
    f = profile.fits(meas["points"])["softirq_cpu1"]
    assert abs(f["coef"]["ns_per_packet"] - 600) < 3 * f["se"]["ns_per_packet"] + 1
    assert abs(f["coef"]["ns_per_packet_per_filter"] - 5) < 3 * f["se"][
        "ns_per_packet_per_filter"] + 0.01
    prof = profile.build(meas, Plan(), hz=250)
    path = tmp_path / "cal.yaml"
    profile.write(prof, str(path))
    loaded = load_profile(str(path))
    st = loaded["stages"]
    assert st["stack_rx"]["source"].startswith("measured here")
    assert "not measured here" in st["hardirq"]["source"]
    assert st["recvmsg"]["ns"] == pytest.approx(300, rel=0.05)
    # the model's own softirq time per packet with the solved stack_rx is the fitted c0
    solved = prof["lab"]["stack_rx_solution"]
    m = profile.model_softirq_per_packet(str(path), {}, solved["load_pps"])
    assert m == pytest.approx(f["coef"]["ns_per_packet"], rel=0.03)
    meta = yaml.safe_load(path.read_text())["measured"]
    assert meta["hz"] == 250 and meta["kernel"] and meta["cpu_model"] and meta["date"]
    # and the rate checks accept it: none of their filter counts was fitted on
    assert rates.load(str(path))["u32_filter_ns"] == prof["lab"]["u32_filter_ns"]


def test_rate_checks_refuse_profiles_that_cannot_hold_out(tmp_path):
    with pytest.raises(UsageError, match="no 'lab' section"):
        rates.load(str(profile.__file__).replace("calibrate/profile.py",
                                                 "profiles/modern-x86.yaml"))
    meas = {"pilots": [], "points": _points(600.0, 5.0), "background_ns_per_s": 0.0}
    prof = profile.build(meas, Plan(), hz=None)
    prof["lab"]["calibration_filters"] = [0, rates.FILTERS["overload_drops"]]
    path = tmp_path / "cal.yaml"
    profile.write(prof, str(path))
    with pytest.raises(UsageError, match="hold out"):
        rates.load(str(path))


def test_calibrate_cannot_run_without_root(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(guard.os, "geteuid", lambda: 1000)
    assert main(["calibrate", "--quiet", "-o", str(tmp_path / "p.yaml")]) == 77
    assert "needs root" in capsys.readouterr().out
    assert not (tmp_path / "p.yaml").exists()
    assert main(["calibrate", "-o", str(tmp_path / "no" / "p.yaml")]) == 2
    assert main(["calibrate", "--base", "no-such", "-o", str(tmp_path / "p.yaml")]) == 2
    assert main(["kernel-check", "--repeat", "2"]) == 2


def _rate_profile(tmp_path) -> dict:
    meas = {"pilots": [], "points": _points(600.0, 5.0), "background_ns_per_s": 0.0}
    path = tmp_path / "cal.yaml"
    profile.write(profile.build(meas, Plan(), hz=None), str(path))
    return rates.load(str(path))


def test_rate_model_counts_the_drain_as_the_kernel_does(tmp_path):
    # when a saturating sender stops, CPU 1's backlog still holds up to
    # netdev_max_backlog packets; the kernel's softnet counters and softirq time both
    # include their processing, so packets per CPU-second cannot depend on the run length
    prof = _rate_profile(tmp_path)
    short = rates.model_run(prof, 1200, 400e3, duration=0.05)
    long = rates.model_run(prof, 1200, 400e3, duration=0.3)
    assert short["drop_fraction"] > 0.5 and long["drop_fraction"] > 0.5
    assert short["pps_per_cpu_second"] == pytest.approx(long["pps_per_cpu_second"], rel=0.01)


def test_paced_sender_bursts_become_on_off_arrivals_at_its_rate(tmp_path):
    prof = _rate_profile(tmp_path)
    run = {"sender_sleeps": 100, "sender_slept_s": 0.085, "send_seconds": 0.1,
           "sent": 8000, "sent_pps": 80e3}
    assert rates.arrivals([dict(run, sender_sleeps=0, sender_slept_s=0.0)]) is None
    shape = rates.arrivals([run] * 3)
    assert shape["on_s"] + shape["off_s"] == pytest.approx(0.1 / 100)
    bursts = rates.model_run(prof, 1000, 80e3, duration=0.1, shape=shape)
    smooth = rates.model_run(prof, 1000, 80e3, duration=0.1)
    # the same packets (the model's own generator), all processed ...
    assert bursts["processed_pps"] == pytest.approx(80e3, rel=0.02)
    assert bursts["drop_fraction"] == 0
    # ... but CPU 1 is woken a few times per burst (the model's poll sees only what was
    # enqueued before it started), not for almost every packet
    assert 100 <= bursts["ipis"] < 6 * 100 < smooth["ipis"] / 5


def test_a_receiver_wake_up_is_measured_apart_from_the_fit():
    points = _points(600.0, 5.0)
    wakes = []
    for i, per_wake in enumerate((9000.0, 10000.0, 11000.0)):
        proc, wk = 30000 + 1000 * i, 4000 - 500 * i
        wakes.append(dict(points[0], filters=800, processed=proc, sent=proc, received=proc,
                          recv_wakeups=wk,
                          softirq_ns=(600.0 + 5.0 * 800) * proc + per_wake * wk))
    prof = profile.build({"pilots": [], "points": points, "wakeup_points": wakes,
                          "background_ns_per_s": 0.0}, Plan(), hz=None)
    f = profile.fits(points)["softirq_cpu1"]["coef"]
    got = prof["lab"]["receiver_wakeup_softirq_ns"]
    # what is left of each run after the fitted per-packet cost, per wake-up
    want = [(w["softirq_ns"] - (f["ns_per_packet"] + 800 * f["ns_per_packet_per_filter"])
             * w["processed"]) / w["recv_wakeups"] for w in wakes]
    assert got["ns"] == pytest.approx(np.mean(want), abs=0.1)
    assert got["min"] == pytest.approx(min(want), abs=0.1) and got["runs"] == 3
    assert got["ns"] == pytest.approx(10000, rel=0.1)  # the fit is close to the truth
    assert got["se"] == pytest.approx(np.std(want, ddof=1) / 3 ** 0.5, abs=0.1)
    # the profile's wakeup_remote: the model's softirq time per packet on CPU 1 in the
    # waking runs' lab, rerun here with that value, is the kernel's
    st = prof["stages"]["wakeup_remote"]
    assert st["source"].startswith("measured here") and "standard error" in st["source"]
    # (its reader reading lab.receiver_wake_delay_ns after a wake-up, so that it is woken
    # as often per packet as the kernel's receiver)
    mprof = {"path": "modern-x86", "stack_rx": prof["stages"]["stack_rx"]["ns"],
             "u32_filter_ns": prof["lab"]["u32_filter_ns"],
             "receiver_wake_delay_ns": prof["lab"]["receiver_wake_delay_ns"],
             "costs": {"recvmsg": prof["stages"]["recvmsg"]["ns"],
                       "wakeup_remote": st["ns"]}}
    m = rates.model_like(mprof, 800, profile.as_rate_runs(wakes), waking=True,
                         flows=measure.FLOWS)
    kernel = sum(w["softirq_ns"] for w in wakes) / sum(w["processed"] for w in wakes)
    assert m["receiver_wakeups_remote"] > 0 and st["ns"] > 0
    assert m["receiver_wakeups_remote"] / (m["processed_pps"] * m["seconds"]) == \
        pytest.approx(got["wakeups_per_packet"], rel=0.1)
    assert m["softirq_share"] / m["processed_pps"] * 1e9 == pytest.approx(kernel, rel=0.02)
    assert profile.build({"pilots": [], "points": points, "background_ns_per_s": 0.0},
                         Plan(), hz=None)["lab"]["receiver_wakeup_softirq_ns"] is None


def test_waking_check_runs_a_waiting_receiver_and_charges_its_wake_ups(tmp_path, monkeypatch):
    prof = _rate_profile(tmp_path)
    # the timer-reading lab: nothing on CPU 1 wakes the kernel's receiver, nor the model's
    assert rates.scenario(prof, 1000, 50e3)["host"]["costs"]["wakeup_remote"] == 0
    reader = {"user_ns": 2000.0, "system_ns": 1500.0}
    d = rates.scenario(prof, 1000, 50e3, reader=reader)
    assert "wakeup_remote" not in d["host"]["costs"]  # the profile's value
    assert d["apps"][0]["cost"] == {"user_ns": 2000.0, "syscall_ns": 1500.0}
    run = {"send_seconds": 0.2, "sent": 10000, "sent_pps": 50e3, "sender_sleeps": 0,
           "sender_slept_s": 0.0, "received": 10000, "receiver_utime_ns": 2e7,
           "receiver_stime_ns": 1.5e7, "softirq_share": 0.3, "receiver_wakeups": 2000}
    seen = {}

    def kernel_runs(ctx, n, pps, nap=rates.RECV_NAP):
        seen.update(n=n, pps=pps, nap=nap)
        return [run] * 3

    monkeypatch.setattr(rates, "kernel_runs", kernel_runs)
    res = rates.softirq_half_load_waking(SimpleNamespace(profile=prof))
    assert seen["nap"] == 0 and seen["n"] not in Plan().filters
    assert seen["pps"] == pytest.approx(0.5 * rates.model_capacity(prof, seen["n"]))
    assert res["model"]["receiver"] == pytest.approx(reader)
    assert res["model"]["receiver_wakeups_remote"] > 0
    assert res["kernel"]["receiver_wakeups_per_s"]["mean"] == pytest.approx(2000 / 0.2)
    assert [c["what"].split(":")[0] for c in res["criteria"]] == [
        "softirq_share", "receiver wake-ups per second"]
    assert res["agree"] == all(c["ok"] for c in res["criteria"])
    free = dict(prof, costs={"wakeup_remote": 0.0})
    assert rates.model_like(free, seen["n"], [run] * 3, waking=True)["softirq_share"] < \
        res["model"]["softirq_share"]


def test_the_rps_hand_off_becomes_ipi_latency_less_the_stages_on_its_path():
    from rxlab.host.bpf import HANDOFF_BUCKETS, HANDOFF_SHIFT
    from rxlab.host.experiment import handoff_quantiles

    before, after = [0] * HANDOFF_BUCKETS, [0] * HANDOFF_BUCKETS
    before[3] = after[3] = 7  # counted before the run: not this run's
    after[10], after[100], after[300] = 10, 80, 10
    q = handoff_quantiles(before, after)
    w = 1 << HANDOFF_SHIFT
    assert q == {"n": 100, "min": 10.5 * w, "p10": 10.5 * w, "median": 100.5 * w,
                 "p90": 100.5 * w}
    base = {"pilots": [], "points": _points(600.0, 5.0), "background_ns_per_s": 0.0}
    prof = profile.build(dict(base, handoff=[q, dict(q, median=50.5 * w), q]), Plan())
    st = prof["stages"]["ipi_latency"]
    other = prof["stages"]["ipi_send"]["ns"] + prof["stages"]["ipi_recv"]["ns"]
    assert st["ns"] == pytest.approx(100.5 * w - other, abs=0.1)  # the median run
    assert st["source"].startswith("measured here") and "netif_rx" in st["source"]
    few = dict(q, n=20)  # too few hand-offs to say anything: the base profile's value
    prof = profile.build(dict(base, handoff=[few]), Plan())
    assert prof["stages"]["ipi_latency"]["source"].startswith("not measured here")
