"""``rxlab host apply --yes`` under signals, against veth devices in network namespaces.

A 13-step plan (channels, rps_cpus and rps_flow_cnt of three rx queues, six global
net.core sysctls; 12 and five on a kernel without flow limit) is interrupted at every
step with SIGINT and with SIGTERM: the CLI runs
as a child process that the test hook ``RXLAB_TEST_PAUSE_AT_STEP=K`` stops before step K
(``ROLLBACK_FILE.paused`` appears), the signal arrives there, and the namespace's sysfs
values and the machine's sysctls must be exactly as before. SIGKILL must leave the
rollback file "applying", reported by the next ``host show`` and ``host apply``.

Root only (skipped with the reason otherwise). The net.core sysctls are global to the
machine: they are saved before and written back after every test, and each test holds
kernel-check's lock so that the two never change them at the same time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.plan_output import plan_steps

from rxlab.host import apply as host_apply
from rxlab.host import caps
from rxlab.host.export import scenario_from_host
from rxlab.host.netns import in_netns
from rxlab.host.read import SYSCTL_DIR, SYSCTLS, read_host

RXLAB = [sys.executable, "-m", "rxlab.cli.main"]
FLOW_LIMIT = caps.probe().has("flow_limit")  # flow_limit_table_len is one of the steps
SYSCTL_STEPS = 6 if FLOW_LIMIT else 5
STEPS = 7 + SYSCTL_STEPS
WAIT = 60  # seconds for a child to reach its pause (imports, reading the device)


def _lab_reason() -> str | None:
    from rxlab.host.lab import unavailable

    why = unavailable()
    if why is None and shutil.which("ethtool") is None:
        why = "needs ethtool (apt-get install ethtool)"
    return why


def _sysctls() -> dict[str, str]:
    return {n: (SYSCTL_DIR / n).read_text().strip() for n in SYSCTLS
            if (SYSCTL_DIR / n).exists()}  # no flow limit without CONFIG_NET_FLOW_LIMIT


def _restore_sysctls(saved: dict[str, str]) -> None:
    for name, v in saved.items():
        if (SYSCTL_DIR / name).read_text().strip() != v:
            (SYSCTL_DIR / name).write_text(v + "\n")


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _forget_records(dev: str, netns: str) -> None:
    for p in host_apply._state_paths(dev, netns):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


@pytest.fixture(scope="module")
def lab():
    why = _lab_reason()
    if why:
        pytest.skip(why)
    from rxlab.host.lab import Lab

    saved = _sysctls()
    try:
        with Lab.named(f"rxsig{os.getpid() % 100000}", queues=4, subnet="10.233.0") as lab:
            # values on rx-3, which the plan's `ethtool -L rx 3` removes: the rollback
            # must bring them back with the queue
            for attr, v in (("rps_cpus", "1"), ("rps_flow_cnt", "4096")):
                in_netns(lab.ns_rx, _write, f"/sys/class/net/{lab.dev_rx}/queues/rx-3/{attr}", v)
            yield lab
    finally:
        _restore_sysctls(saved)


@pytest.fixture
def guarded(lab):
    """The test holds kernel-check's lock; whatever happens, sysctls, the device and the
    record of an apply are put back afterwards."""
    from rxlab.host.guard import CannotRun, run_lock

    saved = _sysctls()
    files: list[Path] = []
    try:
        with run_lock():
            try:
                yield files
            finally:
                for f in files:  # rollback files a failed test may leave half-done
                    if f.exists() and json.loads(f.read_text())["state"] != "rolled-back":
                        with contextlib.suppress(Exception):
                            host_apply.rollback(f, log=lambda m: None)
                _restore_sysctls(saved)
                _forget_records(lab.dev_rx, lab.ns_rx)
    except CannotRun as err:
        pytest.skip(str(err))


def snapshot(lab) -> dict:
    """Everything a plan here may write: the device's queues and their values, the
    machine's net.core sysctls, exactly as the kernel prints them."""
    info = read_host(lab.ns_rx, [lab.dev_rx], with_ethtool=False)
    d = info["devices"][lab.dev_rx]
    return {"rx": d["rx"], "tx": d["tx"], "sysctls": _sysctls()}


@pytest.fixture(scope="module")
def scenario(lab, tmp_path_factory) -> Path:
    """13 changes: rx 4 -> 3, rps_cpus and rps_flow_cnt of rx-0..2, six sysctls (12 and
    five without flow limit in the kernel)."""
    info = read_host(lab.ns_rx, [lab.dev_rx])
    data, _ = scenario_from_host(info, lab.dev_rx)
    now = {k: int(v) for k, v in _sysctls().items() if k != "flow_limit_cpu_bitmap"}
    data["nic"]["queues"] = 3
    data["kernel"].update({
        "rps_cpus": {0: "1", 1: "2", 2: "3"}, "rps_flow_cnt": {0: 64, 1: 128, 2: 256},
        "netdev_max_backlog": now["netdev_max_backlog"] + 1,
        "netdev_budget": now["netdev_budget"] + 1,
        "netdev_budget_usecs": now["netdev_budget_usecs"] + 1,
        "dev_weight": now["dev_weight"] + 1,
        **({"flow_limit_table_len": 2 * host_apply.rfs_size(now["flow_limit_table_len"])}
           if FLOW_LIMIT else {}),
        "rps_sock_flow_entries": 2 * host_apply.rfs_size(now["rps_sock_flow_entries"])
        or 1024,
    })
    p = tmp_path_factory.mktemp("sig") / "apply13.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _sigint_default() -> None:
    # a shell starts background jobs with SIGINT ignored and exec keeps that; the child
    # must take SIGINT however the suite itself was started
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(lab, scenario: Path, rb: Path, pause_at: int | None, *extra: str):
    env = dict(os.environ)
    env.pop(host_apply.TEST_PAUSE_ENV, None)
    if pause_at:
        env[host_apply.TEST_PAUSE_ENV] = str(pause_at)
    return subprocess.Popen(
        [*RXLAB, "host", "apply", str(scenario), "--dev", lab.dev_rx, "--netns", lab.ns_rx,
         "--yes", "--rollback-file", str(rb), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=env, preexec_fn=_sigint_default)


def wait_paused(p: subprocess.Popen, rb: Path) -> None:
    marker = Path(f"{rb}.paused")
    deadline = time.monotonic() + WAIT
    while not marker.exists():
        if p.poll() is not None:
            raise AssertionError(f"apply ended (rc {p.returncode}) before its pause: "
                                 f"{p.communicate()}")
        assert time.monotonic() < deadline, "apply did not reach its pause"
        time.sleep(0.02)


def cli(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != host_apply.TEST_PAUSE_ENV}
    return subprocess.run([*RXLAB, *argv], capture_output=True, text=True, timeout=WAIT,
                          env=env, stdin=subprocess.DEVNULL)


def test_the_plan_has_all_steps_and_marks_the_machine_wide_ones(lab, scenario):
    r = cli("host", "apply", str(scenario), "--dev", lab.dev_rx, "--netns", lab.ns_rx)
    assert r.returncode == 0, r.stderr
    assert f"{STEPS} change(s) for {lab.dev_rx} in netns {lab.ns_rx}:" in r.stdout
    listed = plan_steps(r.stdout)
    assert len(listed) == STEPS
    wide = [ln for ln in listed if ln.endswith(f"machine-wide, not only netns {lab.ns_rx}")]
    assert len(wide) == SYSCTL_STEPS and all("sysctl -w net.core." in ln for ln in wide)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("k", range(1, STEPS + 1))
def test_interrupted_apply_leaves_the_host_as_before(lab, guarded, scenario, tmp_path, k, sig):
    interrupt(lab, guarded, scenario, tmp_path, k, sig)


def test_a_closed_terminal_rolls_back_too(lab, guarded, scenario, tmp_path):
    interrupt(lab, guarded, scenario, tmp_path, 7, signal.SIGHUP)


def interrupt(lab, guarded, scenario, tmp_path, k, sig):
    before = snapshot(lab)
    rb = tmp_path / "rollback.json"
    guarded.append(rb)
    p = start(lab, scenario, rb, k)
    try:
        wait_paused(p, rb)
        # the first k - 1 changes are really in place when the signal comes
        assert (snapshot(lab) != before) == (k > 1)
        p.send_signal(sig)
        out, err = p.communicate(timeout=WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    n = k - 1
    assert err.splitlines() == [
        f"rxlab: interrupted ({sig.name}) at step {k} of {STEPS}; rolled back {n} "
        f"change{'' if n == 1 else 's'}; the host is as before"]
    assert snapshot(lab) == before
    assert json.loads(rb.read_text())["state"] == "rolled-back"
    assert host_apply.pending(lab.dev_rx, lab.ns_rx) is None
    assert not Path(f"{rb}.paused").exists()


def test_sigkill_leaves_applying_which_show_and_apply_report(lab, guarded, scenario,
                                                             tmp_path):
    before = snapshot(lab)
    rb, rb2 = tmp_path / "killed.json", tmp_path / "next.json"
    guarded.append(rb)
    p = start(lab, scenario, rb, 8)
    try:
        wait_paused(p, rb)
        p.kill()
        p.wait(timeout=WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert json.loads(rb.read_text())["state"] == "applying"
    assert snapshot(lab) != before  # seven changes left behind
    resolve = f"rxlab host rollback {rb.resolve()}"

    shown = cli("host", "show", "--netns", lab.ns_rx, "--dev", lab.dev_rx)
    assert shown.returncode == 0
    assert len(shown.stderr.splitlines()) == 1, shown.stderr
    assert "killed before it finished" in shown.stderr and resolve in shown.stderr
    assert cli("host", "show", "--json", "--netns", lab.ns_rx).stderr == shown.stderr

    dry = cli("host", "apply", str(scenario), "--dev", lab.dev_rx, "--netns", lab.ns_rx)
    assert dry.returncode == 0 and dry.stderr == shown.stderr
    yes = cli("host", "apply", str(scenario), "--dev", lab.dev_rx, "--netns", lab.ns_rx,
              "--yes", "--rollback-file", str(rb2))
    assert yes.returncode == 2 and len(yes.stderr.splitlines()) == 1
    assert yes.stderr.startswith("rxlab: error: ") and resolve in yes.stderr
    assert not rb2.exists()

    done = cli("host", "rollback", str(rb))
    assert done.returncode == 0, done.stderr
    assert (f"restored 7 of {STEPS} value(s) ({STEPS - 7} already held the previous value)"
                in done.stdout)
    assert snapshot(lab) == before
    assert json.loads(rb.read_text())["state"] == "rolled-back"
    again = cli("host", "show", "--netns", lab.ns_rx, "--dev", lab.dev_rx)
    assert again.returncode == 0 and again.stderr == ""


def test_a_rollback_that_fails_names_the_file_and_the_command(guarded, tmp_path):
    # its own pair of namespaces: the device goes away mid-apply, so restoring its
    # rps_cpus must fail; the sysctl (step 2, never written) must not count as a failure
    from rxlab.host.lab import Lab

    with Lab.named(f"rxsik{os.getpid() % 100000}", queues=1, subnet="10.234.0") as small:
        info = read_host(small.ns_rx, [small.dev_rx])
        data, _ = scenario_from_host(info, small.dev_rx)
        data["kernel"]["rps_cpus"] = "1"
        data["kernel"]["netdev_max_backlog"] = int(_sysctls()["netdev_max_backlog"]) + 1
        sc = tmp_path / "two.yaml"
        sc.write_text(yaml.safe_dump(data))
        rb = tmp_path / "rb.json"
        p = start(small, sc, rb, 2)
        try:
            wait_paused(p, rb)
            small.run(small.ns_rx, ["ip", "link", "del", small.dev_rx])
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=WAIT)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            _forget_records(small.dev_rx, small.ns_rx)
    assert p.returncode == 128 + signal.SIGTERM
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rxlab: interrupted (SIGTERM) at step 2 of 2; rolled back "
                               "0 changes, but ROLLBACK INCOMPLETE: echo 0 > ")
    assert lines[0].endswith(f"; finish with: rxlab host rollback {rb}")
    assert json.loads(rb.read_text())["state"] == "rollback-incomplete"


def test_a_signal_after_a_write_undoes_that_step_too(lab, guarded, scenario, tmp_path,
                                                     monkeypatch, capsys):
    # in process: SIGTERM lands right after step 5's write, before its read-back
    from rxlab.cli.main import main

    before = snapshot(lab)
    real = host_apply._write
    seen = []

    def write(step, value, dev, netns):
        real(step, value, dev, netns)
        seen.append(step)
        if len(seen) == 5:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(host_apply, "_write", write)
    monkeypatch.delenv(host_apply.TEST_PAUSE_ENV, raising=False)
    rb = tmp_path / "rb.json"
    guarded.append(rb)
    old_term = signal.getsignal(signal.SIGTERM)
    rc = main(["host", "apply", str(scenario), "--dev", lab.dev_rx, "--netns", lab.ns_rx,
               "--yes", "--rollback-file", str(rb)])
    err = capsys.readouterr().err
    assert rc == 128 + signal.SIGTERM
    assert err == (f"rxlab: interrupted (SIGTERM) at step 5 of {STEPS}; rolled back 5 "
                   "changes; the host is as before\n")
    assert snapshot(lab) == before
    assert signal.getsignal(signal.SIGTERM) is old_term  # handlers are given back


def test_ctrl_c_to_the_whole_process_group_at_any_moment(lab, guarded, scenario, tmp_path):
    # a terminal's Ctrl-C reaches rxlab and every child it has forked or started at that
    # moment; sent at eight moments spread over the apply (no pause): each run ends either
    # applied in full (then rolled back here) or as before, with one line and no traceback
    before = snapshot(lab)
    outcomes = []
    for j in range(8):
        rb = tmp_path / f"rb{j}.json"
        guarded.append(rb)
        env = {k: v for k, v in os.environ.items() if k != host_apply.TEST_PAUSE_ENV}
        p = subprocess.Popen(
            [*RXLAB, "host", "apply", str(scenario), "--dev", lab.dev_rx, "--netns",
             lab.ns_rx, "--yes", "--rollback-file", str(rb)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, env=env, start_new_session=True, preexec_fn=_sigint_default)
        try:
            deadline = time.monotonic() + WAIT
            while not rb.exists() and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.012 * j)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGINT)
            _, err = p.communicate(timeout=WAIT)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        state = json.loads(rb.read_text())["state"]
        assert "Traceback" not in err and "Exception" not in err, err
        if state == "applied":  # the signal came after the end
            assert p.returncode in (0, -signal.SIGINT) and err == ""
            host_apply.rollback(rb, log=lambda m: None)
        else:
            assert state == "rolled-back" and len(err.splitlines()) == 1, err
            assert p.returncode in (130, -signal.SIGINT)  # a shell shows 130 for both
            assert err.endswith("the host is as before\n")
        assert snapshot(lab) == before
        outcomes.append(state)
    assert "rolled-back" in outcomes
