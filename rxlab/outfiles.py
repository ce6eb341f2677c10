"""Every file rxlab writes goes through here: output is written, never replaced.

Folders (``--out DIR``): the files are written into a new temporary folder beside DIR,
then moved into DIR one by one; ``.rxlab-manifest.json`` in DIR lists what rxlab wrote
there, and only those files are ever replaced or deleted. A folder holding anything else
is refused (``--force`` writes beside the user's files); so are ``.``, ``/``, the home
folder, any folder the current one lies in, and a symlink.

Files (``-o FILE``): written to a temporary name in the same folder, fsynced, renamed;
an existing FILE that is not a regular file (a device, FIFO, socket, folder) is refused
and left as it is; ``-`` means standard output.

The file system's refusals come back as one line naming the path and the cause: the
user's choice of path (permission, name too long, a loop, /proc) is a ``UsageError``
(exit 2), the machine's state (no space, read-only, I/O error) an ``OutputError``
(exit 1). Whatever fails, nothing half-written is left: no 0-byte file, no temporary.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rxlab.errors import OutputError, UsageError

MANIFEST = ".rxlab-manifest.json"
TMP_TAG = ".rxlab-tmp-"  # in every temporary name, beside the target
ENVIRONMENT = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG}
PSEUDO_FS = ("/proc", "/sys")  # writing there reconfigures the kernel, never a result
NAME_MAX = 255
PATH_MAX = 4096  # linux/limits.h, the terminating NUL included


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


FILE_MODE = 0o666 & ~_umask()  # what open() would have given (mkstemp makes 0600)


# ---------------------------------------------------------------- one-line errors
def fs_error(err: OSError, path, flag: str) -> Exception:
    """An OSError from writing ``path`` as one line: OutputError for the machine's state
    (exit 1), UsageError for the path the user chose (exit 2)."""
    cause, path = err.strerror or str(err), _short(path)
    if err.errno in ENVIRONMENT:
        return OutputError(f"{flag} {path}: cannot write: {cause}")
    return UsageError(f"{flag} {path}: cannot write: {cause}; give another path")


def _short(path) -> str:
    text = str(path)
    return text if len(text) <= 80 else text[:77] + "..."


@contextlib.contextmanager
def answering(path, flag: str) -> Iterator[None]:
    """Turn an OSError raised inside the block into ``fs_error``'s one line."""
    try:
        yield
    except OSError as err:
        raise fs_error(err, path, flag) from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def _check_name(path: Path, flag: str) -> None:
    """A name or path longer than the file system takes fails now, not after the work."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise UsageError(f"{flag} {_short(path)}: a name in it is longer than {NAME_MAX} "
                             "bytes; give a shorter name")
    if len(os.fsencode(str(path.absolute()))) >= PATH_MAX:
        raise UsageError(f"{flag} {_short(path)}: the path is longer than {PATH_MAX - 1} "
                         "bytes; give a shorter path")


def _check_pseudo(path: Path, flag: str) -> None:
    real = Path(os.path.realpath(path))
    if any(real.is_relative_to(p) for p in PSEUDO_FS):
        raise UsageError(f"{flag} {path}: is under /{real.parts[1]} (kernel files, not "
                         "results); give a path elsewhere")


# ---------------------------------------------------------------- -o FILE
def check_file(path: str | Path, flag: str = "-o") -> Path:
    """Refuse, before any work, a file output that cannot be written as a regular file
    in an existing folder. ``-`` (standard output) passes."""
    path = Path(path)
    if str(path) == "-":
        return path
    _check_name(path, flag)
    _check_pseudo(path, flag)
    try:
        st = os.stat(path)  # through a symlink: the file it names is the one written
    except FileNotFoundError:
        if path.is_symlink():
            raise UsageError(f"{flag} {path}: is a symlink to nothing; give a file path") \
                from None
        st = None
    except OSError as err:
        raise fs_error(err, path, flag) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{flag} {path}: is {_kind(st.st_mode)}; rxlab writes only regular "
                         "files (left as it is); give a file path, or - for standard output")
    parent = Path(os.path.realpath(path)).parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {path.parent} does not exist")
    return path


def write_file(path: str | Path, data: str | bytes, flag: str = "-o",
               verify=None) -> Path:
    """Write ``data`` to ``path`` whole (temporary name, fsync, rename) or not at all;
    ``verify(tmp_path)`` may check the written file before it takes the name."""
    path = check_file(path, flag)
    if str(path) == "-":
        _to_stdout(data)
        return path
    real = Path(os.path.realpath(path))  # a symlink to a file stays a symlink
    with answering(path, flag):
        replace_file(real, data, verify=verify)
    return path


def _to_stdout(data: str | bytes) -> None:
    if isinstance(data, bytes):
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data)
    sys.stdout.flush()


def replace_file(path: Path, data: str | bytes, verify=None) -> None:
    """The atomic write itself: readers see the old file or the whole new one, never a
    part. Raises OSError (callers say which flag it was)."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # an existing file keeps its mode
    except FileNotFoundError:
        mode = FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}{TMP_TAG}", suffix=".tmp",
                               dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if verify is not None:
            verify(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot fsync a folder
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------- --out DIR
def _refuse_place(out: Path, flag: str) -> None:
    """``.``, ``/``, home, and any folder the current one lies in hold more than a
    result: rxlab never writes a result folder there."""
    real = Path(os.path.realpath(out))
    if Path.cwd().resolve().is_relative_to(real):
        raise UsageError(f"{flag} {out}: is the current folder or one it lies in; give a "
                         "folder of its own, e.g. --out res")
    if Path.home().resolve().is_relative_to(real):
        raise UsageError(f"{flag} {out}: is the home folder or one it lies in; give a "
                         "folder of its own, e.g. --out ~/res")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def own_files(out: Path) -> set[str]:
    """The names rxlab's manifest in ``out`` lists (none if it is missing or damaged)."""
    try:
        names = json.loads((out / MANIFEST).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in names if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")}


def _foreign(out: Path, own: set[str]) -> list[str]:
    try:
        names = sorted(os.listdir(out))
    except OSError:
        return []
    return [n for n in names if n != MANIFEST and n not in own]


def _shown(names: list[str]) -> str:
    head = ", ".join(names[:3])
    return head + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def check_dir(out: str | Path, flag: str = "--out", force: bool = False,
              names: tuple[str, ...] = (), own=None) -> Path:
    """Refuse, before any work, an output folder rxlab must not write: a symlink, a
    place that holds more than a result, one that cannot be made, one holding files rxlab
    did not write (unless ``force``; even then a file of the user's named like one of
    ``names`` is refused). ``own(name)`` may widen what counts as rxlab's (a sweep's)."""
    out = Path(out)
    _check_name(out, flag)
    with answering(out, flag):  # a folder we may not even look into, say
        return _check_dir(out, flag, force, names, own)


def _check_dir(out: Path, flag: str, force: bool, names: tuple[str, ...], own) -> Path:
    if out.is_symlink():
        raise UsageError(f"{flag} {out}: is a symlink; give the folder itself "
                         f"({os.path.realpath(out)}) or a new one")
    _refuse_place(out, flag)
    _check_pseudo(out, flag)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{flag} {out}: exists and is not a folder; give a folder path")
    anc = out.absolute()
    while not anc.exists() and not anc.is_symlink():
        anc = anc.parent
    if not anc.is_dir():
        what = "is a file" if anc.is_file() else "is not a folder"
        raise UsageError(f"{flag} {out}: cannot be made: {anc} {what}; give a folder path")
    if _read_only(anc):  # the machine's state, not the path's: exit 1
        raise OutputError(f"{flag} {out}: cannot write: {anc} is on a read-only file system")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {out}: cannot be made: {anc} is not writable; give a "
                         "writable folder")
    if out.is_dir():
        mine = own_files(out)
        other = [n for n in _foreign(out, mine) if own is None or not own(out / n)]
        clash = [n for n in other if n in names]
        if other and not force:
            raise UsageError(f"{flag} {out}: holds files rxlab did not write "
                             f"({_shown(other)}); give a new or empty folder, or add --force "
                             "to write beside them (only rxlab's own files are replaced)")
        if clash:
            raise UsageError(f"{flag} {out}: {_shown(clash)} there is not rxlab's (not in "
                             f"{MANIFEST}); move it, or give another folder")
    return out


def make_dir(out: str | Path, flag: str = "--out", force: bool = False, own=None) -> Path:
    """``check_dir``, then make the folder (a sweep writes into it as runs finish)."""
    out = check_dir(out, flag, force, own=own)
    with answering(out, flag):
        out.mkdir(parents=True, exist_ok=True)
    return out


class OutDir:
    """``with OutDir(out) as tmp:`` write files into ``tmp``; on a clean exit they are
    moved into ``out`` (replacing only rxlab's own files there) and the manifest updated;
    on any error ``tmp`` is removed and ``out`` is as it was."""

    def __init__(self, out: str | Path, flag: str = "--out", force: bool = False):
        self.out, self.flag, self.force = Path(out), flag, force
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        out = check_dir(self.out, self.flag, self.force)
        with answering(out, self.flag):
            out.absolute().parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{out.name[:40]}{TMP_TAG}",
                                             dir=out.absolute().parent))
        return self.tmp

    def __exit__(self, kind, err, tb) -> None:
        try:
            if kind is None:
                with answering(self.out, self.flag):
                    self._commit()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        if kind is not None and issubclass(kind, OSError):  # a write into tmp failed
            raise fs_error(err, self.out, self.flag) from None

    def _commit(self) -> None:
        names = sorted(os.listdir(self.tmp))
        check_dir(self.out, self.flag, self.force, names=tuple(names))  # it may have changed
        old = own_files(self.out) if self.out.is_dir() else set()
        # the manifest is the last file to take space, and the first to move in: whatever
        # stops the moves, every file it names is rxlab's
        record = {"written_by": "rxlab", "files": sorted(old | set(names))}
        replace_file(self.tmp / MANIFEST, json.dumps(record, indent=1) + "\n")
        for n in names:  # every byte is on disk before any name changes
            _fsync_file(self.tmp / n)
        self.out.mkdir(exist_ok=True)
        for n in [MANIFEST, *names]:
            os.replace(self.tmp / n, self.out / n)
        stale = sorted(old - set(names))  # a previous run's files this run did not write
        for n in stale:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (self.out / n).unlink()
        if stale:  # a manifest naming a removed file is still true: a failure here is not
            with contextlib.suppress(OSError):
                replace_file(self.out / MANIFEST, json.dumps(
                    {"written_by": "rxlab", "files": names}, indent=1) + "\n")
        _fsync_dir(self.out)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- standard output
def stdout_failed(err: OSError) -> str:
    """The one line for a write to standard output that failed (``> /dev/full``); stdout
    is pointed at /dev/null so the interpreter's exit flush stays quiet."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return f"standard output: cannot write: {err.strerror or err}"
