"""Output is written, never replaced (rxlab/outfiles.py): the user's files survive every
refused ``--out`` (the folder is compared before and after), ``-o`` never replaces a
device, a full disk is one line with nothing half-written, and stdout's failures (a full
device, a closed pipe) end quietly or in one line.

The device and full-disk tests need root (``os.mknod``, ``mount -t tmpfs``) and skip
without it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.hostile_cases import ROOT, run_cli, sweep_yaml
from support.one_line import cli_error

from rxlab.errors import OutputError, UsageError
from rxlab.outfiles import MANIFEST, TMP_TAG, fs_error, write_file
from rxlab.sweep.store import LOCK

QUICK = ("--duration", "0.001")
RUN = ("run", "default", *QUICK)
VARIANT = ("compare", "--set-variant", "a:kernel.rps_cpus=f", *QUICK, "--seeds", "2")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod, mount)")


def snapshot(folder: Path) -> dict:
    """Every entry under ``folder``: its kind and, for a file, its bytes."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(folder))] = (
            "link:" + os.readlink(p) if stat.S_ISLNK(st.st_mode) else
            p.read_bytes() if stat.S_ISREG(st.st_mode) else stat.S_IFMT(st.st_mode))
    return out


def rxlab(cwd: Path, *argv, **kw):
    return run_cli(list(argv), cwd, **kw)


def refused(out, *needles) -> str:
    assert out.rc == 2, (out.rc, out.stderr)
    return cli_error(_no_notice(out.stderr), *needles)


def _no_notice(err: str) -> str:  # the compile notice comes once per install; not an error
    return "\n".join(x for x in err.splitlines() if not x.startswith("rxlab: compiling"))


@pytest.fixture
def user_folder(tmp_path):
    """A working folder with the user's files: notes.txt, res/notes.txt."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "notes.txt").write_text("also mine")
    return tmp_path


# ---------------------------------------------------------------- --out DIR refusals
@pytest.mark.parametrize("argv", [RUN, (*RUN, "--seeds", "2"), VARIANT],
                         ids=["run", "run-jobs", "compare"])
@pytest.mark.parametrize("target", ["res", ".", "..", "link", "dangling"])
def test_refused_out_leaves_the_folder_as_it_was(user_folder, argv, target):
    (user_folder / "link").symlink_to("res")
    (user_folder / "dangling").symlink_to("nowhere")
    inner = user_folder / "res"  # '..' is judged from inside res, so the parent is ours
    cwd = inner if target == ".." else user_folder
    before = snapshot(user_folder)
    out = rxlab(cwd, *argv, "--out", target)
    line = refused(out, "--out")
    assert snapshot(user_folder) == before, line
    assert out.stdout == ""


def test_out_home_and_root_are_refused(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    refused(rxlab(tmp_path.parent, *RUN, "--out", str(tmp_path), env=env), "home folder")
    refused(rxlab(tmp_path, *RUN, "--out", "/"), "current folder or one it lies in")


def test_force_writes_beside_the_users_files_and_replaces_only_its_own(user_folder):
    res = user_folder / "res"
    assert rxlab(user_folder, *RUN, "--json", "--out", "res", "--force").rc == 0
    assert (res / "notes.txt").read_text() == "also mine"
    own = json.loads((res / MANIFEST).read_text())["files"]
    assert "result.json" in own and "notes.txt" not in own
    # again without --force: the user's file is still not rxlab's
    refused(rxlab(user_folder, *RUN, "--out", "res"), "notes.txt", "--force")
    # --jobs into it: the run's files go (they were rxlab's), the user's stays
    assert rxlab(user_folder, *RUN, "--seeds", "2", "--json", "--out", "res", "--force").rc == 0
    assert sorted(p.name for p in res.iterdir()) == [MANIFEST, "notes.txt",
                                                      "replications.json"]


def test_a_users_file_named_like_an_output_is_refused_even_with_force(tmp_path):
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "result.json").write_text('{"mine": 1}')
    before = snapshot(tmp_path)
    refused(rxlab(tmp_path, *RUN, "--out", "res", "--force"), "result.json", MANIFEST)
    assert snapshot(tmp_path) == before


def test_a_new_folder_and_rxlabs_own_folder_are_written(tmp_path):
    for _ in range(2):  # the second time every file there is rxlab's: replaced
        assert rxlab(tmp_path, *RUN, "--json", "--out", "res").rc == 0
    names = sorted(p.name for p in (tmp_path / "res").iterdir())
    assert MANIFEST in names and "result.json" in names
    assert not [p for p in tmp_path.iterdir() if TMP_TAG in p.name]


def test_sweep_refuses_a_folder_holding_the_users_file(tmp_path):
    (tmp_path / "w.yaml").write_text(sweep_yaml({"nic.queues": [1]}))
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    refused(rxlab(tmp_path, "sweep", "w.yaml", "--out", "o", "-j", "1", "-q"), "notes.txt")
    assert snapshot(tmp_path) == before
    assert rxlab(tmp_path, "sweep", "w.yaml", "--out", "o", "-j", "1", "-q", "--force").rc == 0
    assert (tmp_path / "o" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "o" / "results.parquet").is_file()


# ---------------------------------------------------------------- -o FILE
def test_o_onto_a_fifo_a_folder_or_a_missing_folder_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "d").mkdir()
    before = snapshot(tmp_path)
    for target, needle in (("fifo", "a FIFO"), ("d", "a folder"), ("no/x", "does not exist")):
        refused(rxlab(tmp_path, "report", ".", "-o", target), needle)
        refused(rxlab(tmp_path, "tune", "default", "-o", target), needle)
    assert snapshot(tmp_path) == before


@root_only
@pytest.mark.parametrize("argv", [("report", "."), ("tune", "default"), ("calibrate",),
                                  ("host", "export")], ids=lambda a: a[0])
def test_o_onto_a_character_device_leaves_it_a_device(tmp_path, argv):
    dev = tmp_path / "dev"
    os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a null device of our own
    refused(rxlab(tmp_path, *argv, "-o", "dev"), "a character device")
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


def test_o_dash_writes_the_file_to_stdout(tmp_path):
    (tmp_path / "w.yaml").write_text(sweep_yaml({"nic.queues": [1]}))
    assert rxlab(tmp_path, "sweep", "w.yaml", "--out", "o", "-j", "1", "-q").rc == 0
    out = rxlab(tmp_path, "report", "o", "-o", "-")
    assert out.rc == 0 and out.stdout.lstrip().startswith("<!DOCTYPE html")
    assert not (tmp_path / "-").exists()


# ---------------------------------------------------------------- a full disk
@contextlib.contextmanager
def small_disk(folder: Path, size: str = "64k"):
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                   check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(path: Path) -> None:
    """Take every free block of the file system ``path`` is on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def nothing_half_written(folder: Path) -> None:
    """No temporary file, no empty file, every JSON and YAML file whole."""
    for p in folder.rglob("*"):
        assert TMP_TAG not in p.name and not p.name.endswith(".tmp"), p
        if p.is_file() and p.name != LOCK:  # a flock(2) target, empty when no one holds it
            assert p.stat().st_size > 0, p
            if p.suffix == ".json":
                json.loads(p.read_text())
            elif p.suffix == ".yaml":
                yaml.safe_load(p.read_text())


@root_only
@pytest.mark.parametrize("argv,target", [
    (RUN, "full/r"),
    ((*RUN, "--seeds", "2"), "full/r"),
    (VARIANT, "full/c"),
    (("sweep", "w.yaml", "-j", "1", "-q"), "full/s"),
    (("host", "export"), "full/h.yaml"),
], ids=["run", "run-jobs", "compare", "sweep", "host-export"])
def test_a_full_disk_is_one_line_and_nothing_half_written(tmp_path, argv, target):
    (tmp_path / "w.yaml").write_text(sweep_yaml({"nic.queues": [1, 2]}))
    with small_disk(tmp_path / "full") as disk:
        fill(disk / "fill")
        flag = "-o" if argv[0] == "host" else "--out"
        out = rxlab(tmp_path, *argv, flag, target)
        assert out.rc == 1, (out.rc, out.stderr)
        cli_error(_no_notice(out.stderr), "No space left on device", target.split("/")[0])
        (disk / "fill").unlink()
        nothing_half_written(disk)


@root_only
def test_a_read_only_file_system_is_one_line_exit_1(tmp_path):
    (tmp_path / "w.yaml").write_text(sweep_yaml({"nic.queues": [1]}))
    (tmp_path / "ro").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(tmp_path / "ro")],
                   check=True)
    try:
        for argv in ((*RUN, "--out", "ro/r"), ("host", "export", "-o", "ro/h.yaml"),
                     ("sweep", "w.yaml", "-j", "1", "-q", "--out", "ro/s"),
                     ("tune", "default", "-o", "ro/t.yaml")):
            out = rxlab(tmp_path, *argv)
            assert out.rc == 1, (argv, out.rc, out.stderr)
            line = cli_error(_no_notice(out.stderr))
            assert "read-only file system" in line.lower(), line
        assert not list((tmp_path / "ro").iterdir())
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "ro")], check=False)


@pytest.mark.parametrize("target,needle", [("loop/x", "Too many levels of symbolic links"),
                                           ("n" * 300, "longer than 255 bytes"),
                                           ("/".join(["d" * 250] * 20), "longer than 4095"),
                                           ("/proc/x", "under /proc"),
                                           ("/sys/x", "under /sys")])
def test_the_file_systems_refusals_of_the_users_path_are_exit_2(tmp_path, target, needle):
    (tmp_path / "loop").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop")
    before = snapshot(tmp_path)
    refused(rxlab(tmp_path, "host", "export", "-o", target), needle)
    refused(rxlab(tmp_path, *RUN, "--out", target), "--out", target[:20])
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- standard output
def test_dev_full_as_stdout_is_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        for argv in (("list",), (*RUN, "--json"), RUN):
            p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", *argv], cwd=tmp_path,
                               stdout=full, stderr=subprocess.PIPE, text=True)
            assert p.returncode == 1, p.stderr
            cli_error(_no_notice(p.stderr), "standard output", "No space left")


@pytest.mark.parametrize("argv", [("list",), RUN, (*RUN, "--json"), (*RUN, "--seeds", "2"),
                                  ("hash", "10.0.0.1", "10.0.0.2", "1", "2"),
                                  ("explain", "arfs")], ids=lambda a: " ".join(a[:2]))
def test_a_closed_pipe_exits_0_quietly(tmp_path, argv):
    r, w = os.pipe()
    os.close(r)  # the reader left before the first line (`rxlab ... | head -0`)
    p = subprocess.run([sys.executable, "-m", "rxlab.cli.main", *argv], cwd=tmp_path,
                       stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    assert p.returncode == 0 and _no_notice(p.stderr) == "", p.stderr


# ---------------------------------------------------------------- compare's names
def test_compare_names_are_unique_and_each_figure_is_its_own(tmp_path):
    base = (ROOT / "rxlab" / "scenarios" / "default.yaml").read_text()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.yaml").write_text(base)
    other = yaml.safe_load(base)
    other.setdefault("kernel", {})["rps_cpus"] = "f"
    (tmp_path / "x#2.yaml").write_text(yaml.safe_dump(other))
    out = rxlab(tmp_path, "compare", "a/x.yaml", "b/x.yaml", "x#2.yaml", *QUICK, "--seeds",
                "2", "--json")
    assert out.rc == 0, out.stderr
    cmp = json.loads(out.stdout)
    names = [c["name"] for c in cmp["configurations"]]
    assert names == ["x", "x#3", "x#2"]
    sources = {c["name"]: c["source"] for c in cmp["configurations"]}
    assert sources == {"x": "a/x.yaml", "x#3": "b/x.yaml", "x#2": "x#2.yaml"}
    for m in cmp["metrics"]:
        assert sorted(m["values"]) == sorted(names)
        assert all(len(v) == 2 and None not in v for v in m["values"].values()), m["key"]


# ---------------------------------------------------------------- the classes, in process
@pytest.mark.parametrize("code,kind", [
    (errno.ENOSPC, OutputError), (errno.EDQUOT, OutputError), (errno.EROFS, OutputError),
    (errno.EIO, OutputError), (errno.EACCES, UsageError), (errno.EPERM, UsageError),
    (errno.ENAMETOOLONG, UsageError), (errno.ELOOP, UsageError), (errno.EISDIR, UsageError)])
def test_the_machine_is_exit_1_the_users_path_exit_2(code, kind):
    err = fs_error(OSError(code, os.strerror(code)), "out/x.yaml", "-o")
    assert isinstance(err, kind) and "\n" not in str(err)
    assert str(err).startswith("-o out/x.yaml: cannot write: " + os.strerror(code))


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "r.yaml"
    target.write_text("old")

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(UsageError, match="Permission denied"):
        write_file(target, "new", "-o")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.yaml"]
