"""The CLI: one-line errors with exit status 2, JSON output shapes, --out files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.one_line import cli_error

from rxlab.cli.main import main

BAD_YAML = "name: x\nhost: {cpus: [\n"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("content,needle", [
    (None, "no such scenario file"),
    (BAD_YAML, "malformed YAML"),
    ("traffic: {groups: [{name: a, flows: 1, src: {addr: 10.0.0.1}, dst: {addr: 10.0.0.2}, "
     "dport: {value: 1}, rate: {pps: -5}}]}\n", "rate.pps"),
    ("host: {cpus: 0}\ntraffic: {groups: []}\n", "host.cpus"),
    ("nic: {queues: 2, irq_affinity: [0, 7]}\nhost: {cpus: 2}\n"
     "traffic: {groups: [{name: a, flows: 1, src: {addr: 10.0.0.1}, "
     "dst: {addr: 10.0.0.2}, dport: {value: 1}, rate: {pps: 5}}]}\n", "irq_affinity[1]"),
    ("nic: {rss: {key: nothex}}\n"
     "traffic: {groups: [{name: a, flows: 1, src: {addr: 10.0.0.1}, "
     "dst: {addr: 10.0.0.2}, dport: {value: 1}, rate: {pps: 5}}]}\n", "nic.rss.key"),
    ("bogus: 1\ntraffic: {groups: [{name: a, flows: 1, src: {addr: 10.0.0.1}, "
     "dst: {addr: 10.0.0.2}, dport: {value: 1}, rate: {pps: 5}}]}\n", "bogus"),
])
def test_bad_scenarios_exit_2_with_one_line(tmp_path, capsys, content, needle):
    path = tmp_path / "s.yaml"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, "run", str(path))
    assert code == 2
    assert needle in cli_error(err)
    assert out == ""


def test_bad_arguments_exit_2(capsys):
    assert run_cli(capsys, "reproduce", "no-such-experiment")[0] == 2
    code, _, err = run_cli(capsys, "run", "default", "--set", "kernel.netdev_budget")
    assert code == 2 and "--set" in cli_error(err)
    code, _, err = run_cli(capsys, "run", "default", "--duration", "-1")
    assert code == 2 and "--duration" in cli_error(err)
    code, _, err = run_cli(capsys, "frobnicate")
    assert code == 2 and cli_error(err)


def test_run_json_has_the_documented_keys(capsys):
    code, out, _ = run_cli(capsys, "run", "default", "--duration", "0.01", "--json")
    assert code == 0
    d = json.loads(out)
    for k in ("offered", "delivered", "dropped", "in_flight", "dropped_by_reason"):
        assert k in d["packets"]
    assert d["throughput"]["delivered_pps"] > 0
    for c in d["cpus"]:
        assert set(c["util"]) >= {"softirq", "system", "user", "idle"}
        assert set(c["softnet_stat"]) >= {"processed", "dropped", "time_squeeze",
                                          "received_rps", "flow_limit_count"}
    assert set(d["latency_ns"]) >= {"p50", "p99", "p999"}
    assert "reordered_packets" in d
    pk = d["packets"]
    assert pk["offered"] == pk["delivered"] + pk["dropped"] + pk["in_flight"]


def test_out_dir_is_complete(tmp_path, capsys):
    out = tmp_path / "out"
    code, _, _ = run_cli(capsys, "run", "default", "--duration", "0.01", "--out", str(out))
    assert code == 0
    names = {p.name for p in out.iterdir()}
    assert {"result.json", "series.csv", "softnet_stat", "cpu_load.png", "latency_cdf.png",
            "throughput.png"} <= names
    assert (out / "cpu_load.png").read_bytes()[:4] == b"\x89PNG"
    header = (out / "series.csv").read_text().splitlines()[0]
    assert header.startswith("t_s,offered_pps,delivered_pps,dropped_pps")


def test_out_refuses_a_file_and_leaves_nothing(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("x")
    code, _, err = run_cli(capsys, "run", "default", "--duration", "0.01", "--out", str(f))
    assert code == 2 and "--out" in cli_error(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


@pytest.mark.parametrize("jobs", [[], ["--seeds", "2"]])
def test_out_under_a_file_is_refused_before_the_run(tmp_path, capsys, jobs):
    f = tmp_path / "taken"
    f.write_text("x")
    code, _, err = run_cli(capsys, "run", "default", "--duration", "0.01", *jobs,
                           "--out", str(f / "sub" / "dir"))
    assert code == 2 and "is a file" in cli_error(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_softnet_flag_prints_kernel_format(capsys):
    code, out, _ = run_cli(capsys, "run", "default", "--duration", "0.01", "--softnet")
    assert code == 0
    lines = out.splitlines()  # the file alone, one line per CPU, no tables before it
    assert len(lines) == 4 and all(len(x.split()) == 15 for x in lines)
    assert all(len(f) == 8 for f in lines[0].split())


def test_cold_cache_is_announced_once_per_run(tmp_path, monkeypatch, capsys):
    """An empty numba cache folder means the next simulation compiles for a minute: the
    CLI process says so on stderr, once; a folder holding the loop's index says nothing,
    and neither does a process the CLI did not name (a pool worker, a library user)."""
    import os

    from rxlab import _cache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_cache, "_announced", False)
    assert not _cache.loop_compiled()
    monkeypatch.setenv(_cache.NOTICE_ENV, str(os.getpid() + 1))  # another process's pid
    _cache.announce_compile()
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(_cache.NOTICE_ENV, str(os.getpid()))
    _cache.announce_compile()
    assert "compiling the event loop" in capsys.readouterr().err
    _cache.announce_compile()
    assert capsys.readouterr().err == ""  # once per process
    monkeypatch.setattr(_cache, "_announced", False)
    index = (tmp_path / _cache.subfolder(Path(_cache.__file__).parent.resolve() / "kernel")
             / "rx_loop.run-335.py311.nbi")
    index.parent.mkdir()
    index.write_bytes(b"")
    assert _cache.loop_compiled()
    _cache.announce_compile()
    assert capsys.readouterr().err == ""


def test_a_second_checkout_compiles_its_own_loop(tmp_path, monkeypatch):
    """numba's cache keeps a folder per source path, so a checkout of the same version at
    another path compiles the loop again: loop_compiled answers for this checkout, not
    for whichever compiled into the key folder first (so the notice is printed)."""
    from rxlab import _cache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    first, second = tmp_path / "a" / "rxlab", tmp_path / "b" / "rxlab"
    index = tmp_path / _cache.subfolder(first / "kernel") / "rx_loop.run-429.py311.nbi"
    index.parent.mkdir()
    index.write_bytes(b"")
    assert _cache.loop_compiled(first) and not _cache.loop_compiled(second)
    assert not _cache.loop_compiled()  # this checkout's path is neither


def test_cache_lists_checkouts_and_prunes_those_gone(tmp_path, capsys):
    """`rxlab cache` shows this version's folder per checkout path that compiled into
    it; --prune --yes deletes the folders of checkouts whose path no longer exists (and
    their line in the record), never another's."""
    from rxlab import _cache

    key = tmp_path / _cache.source_key()
    here, gone = tmp_path / "here" / "rxlab", tmp_path / "gone" / "rxlab"
    here.mkdir(parents=True)
    key.mkdir()
    for root in (here, gone):
        _cache.record_checkout(key, root)
        d = key / _cache.subfolder(root / "kernel")
        d.mkdir()
        (d / "rx_loop.run-1.py311.nbi").write_bytes(b"x" * 100)
    _cache.record_checkout(key, here)  # recorded once
    assert (key / _cache.CHECKOUTS).read_text().splitlines() == [str(here), str(gone)]
    code, out, _ = run_cli(capsys, "cache", "--dir", str(tmp_path), "--prune")
    flat = " ".join(out.split())  # lines wrap at the width
    assert code == 0 and "1 checkout(s) gone" in flat
    assert flat.count(f"{gone} (no longer exists)") == 1
    code, out, _ = run_cli(capsys, "cache", "--dir", str(tmp_path), "--prune", "--yes",
                           "--json")
    d = json.loads(out)
    assert code == 0 and d["deleted"] == [str(gone)]
    assert not (key / _cache.subfolder(gone / "kernel")).exists()
    assert (key / _cache.subfolder(here / "kernel")).exists()
    assert (key / _cache.CHECKOUTS).read_text().splitlines() == [str(here)]


def test_an_input_error_is_one_line_even_with_a_cold_cache(tmp_path, monkeypatch, capsys):
    """The compile notice comes where a run starts, after the input is checked."""
    from rxlab import _cache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_cache, "_announced", False)
    code, _, err = run_cli(capsys, "reproduce", "flow-limit", "--quick", "--seeds", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_a_user_cache_folder_is_keyed_by_the_source_too(tmp_path, monkeypatch):
    """NUMBA_CACHE_DIR set by the user still gets the source key appended (numba alone
    would reuse a stale inlined loop after an upgrade); a keyed folder is kept."""
    from rxlab import _cache

    key = _cache.source_key()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    _cache.configure()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / key)
    _cache.configure()  # a child process inherits the keyed folder unchanged
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / key)


def test_cache_prune_is_a_dry_run_until_yes_and_keeps_this_install(tmp_path, capsys):
    """`rxlab cache --prune` lists the key folders of other versions and deletes nothing;
    with --yes it deletes exactly those: never this install's folder, never a folder or
    file that is not a 16-hex-digit key folder."""
    from rxlab import _cache

    key = _cache.source_key()
    for name in (key, "0123456789abcdef", "fedcba9876543210"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "x.nbc").write_bytes(b"x" * 1000)
    (tmp_path / "notes").mkdir()
    (tmp_path / "deadbeefdeadbeef.txt").write_text("not a folder")
    code, out, _ = run_cli(capsys, "cache", "--dir", str(tmp_path), "--prune")
    assert code == 0 and "would delete 2 folder(s)" in out and "(this version)" in out
    assert len(list(tmp_path.iterdir())) == 5
    code, out, _ = run_cli(capsys, "cache", "--dir", str(tmp_path), "--prune", "--yes",
                           "--json")
    d = json.loads(out)
    assert code == 0 and sorted(d["deleted"]) == ["0123456789abcdef", "fedcba9876543210"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [key, "notes", "deadbeefdeadbeef.txt"])
    assert [r["key"] for r in d["folders"] if r["current"]] == [key]


def test_cache_bad_arguments_are_one_line_errors(tmp_path, capsys):
    code, _, err = run_cli(capsys, "cache", "--yes")
    assert code == 2 and "--yes only goes with --prune" in err
    code, _, err = run_cli(capsys, "cache", "--dir", str(tmp_path / "none"))
    assert code == 2 and "no such folder" in err and len(err.strip().splitlines()) == 1


def test_cache_key_covers_constants_the_loop_compiles_in(tmp_path):
    """A constant in kernel/constants.py (no njit in that file) is compiled into the loop:
    changing it must change the cache key, or an old loop would load silently."""
    import shutil
    from pathlib import Path

    from rxlab import _cache

    root = Path(_cache.__file__).parent
    copy = tmp_path / "rxlab"
    for d in _cache.JITTED_DIRS:
        shutil.copytree(root / d, copy / d)
    shutil.copy(root / "config.py", copy / "config.py")
    before = _cache.source_key(copy)
    assert before == _cache.source_key(root)
    const = copy / "kernel" / "constants.py"
    assert b"njit" not in const.read_bytes()
    const.write_text(const.read_text().replace("RPS_NO_CPU = 0xFFFF", "RPS_NO_CPU = 0xFFFE"))
    assert _cache.source_key(copy) != before
