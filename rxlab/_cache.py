"""Point numba's cache at a folder keyed by the source of rxlab's jitted code.

numba invalidates a cached function only when *its own* file changes, but the event loop
inlines mechanisms from many files: a stale cache would silently run old code. Keying
the cache folder by a hash of the folders that hold jitted code makes any edit a fresh compile.
Must run before numba is imported (numba reads NUMBA_CACHE_DIR at import).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: Folders whose source the compiled event loop depends on. The AF_XDP forwarding model
#: (``rxlab/afxdp``) is pure Python with its own time loop, so it is not listed: editing it
#: never forces a recompile.
JITTED_DIRS = ("engine", "kernel", "nic", "traffic", "xdp")


def source_key(root: Path | None = None) -> str:
    """A hash of every file in the folders that hold jitted code (and of their names):
    not only the files with ``njit``, since the loop compiles in the module constants
    and record dtypes it imports (kernel/state.py, kernel/constants.py, ...)."""
    root = root or Path(__file__).parent
    h = hashlib.sha256()
    jitted = [root / "config.py"] + [
        f for d in JITTED_DIRS for f in (root / d).rglob("*.py")
    ]
    for path in sorted(jitted):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def configure() -> None:
    """Set NUMBA_CACHE_DIR to <base>/<source key>.

    <base> is ~/.cache/rxlab/numba, or the user's own NUMBA_CACHE_DIR: a folder the user
    chose gets the key appended too, else an upgrade of rxlab would load the old loop.
    A folder that already ends with the key (a child process) is kept as it is.
    """
    key = source_key()
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given and Path(given).name == key:
        return
    if given:
        base = Path(given)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rxlab" / "numba"
    os.environ["NUMBA_CACHE_DIR"] = str(base / key)


def loop_compiled() -> bool:
    """True if numba's cache folder holds a compiled event loop (``rx_loop.run``).

    A fresh install or an edit of jitted code starts without one: the first simulation
    then compiles for minutes, which the CLI announces rather than sit silent.
    """
    folder = os.environ.get("NUMBA_CACHE_DIR")
    if not folder or not Path(folder).is_dir():
        return False
    return any(Path(folder).rglob("rx_loop.run-*.nbi"))


NOTICE_ENV = "RXLAB_COMPILE_NOTICE"  # the pid of the CLI process that announces a compile
_announced = False


def announce_compile() -> None:
    """Say on stderr, once, that the event loop is about to be compiled, when it is.

    Called where simulation work starts (a run, or a pool of runs), after the command has
    checked its input, so an input error stays one line. Only the CLI process whose pid
    the CLI put in RXLAB_COMPILE_NOTICE speaks: library users and pool workers stay quiet.
    """
    global _announced
    if _announced or os.environ.get(NOTICE_ENV) != str(os.getpid()):
        return
    _announced = True
    if not loop_compiled():
        import sys

        print("rxlab: compiling the event loop for this install, once: about a minute of "
              "CPU and 0.65 GB of memory on 2 vCPUs (later runs start in under a second)",
              file=sys.stderr)


def _is_key(name: str) -> bool:
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def folders(base: Path) -> list[dict]:
    """The compiled-code folders under ``base`` (one per source key), newest first:
    name, bytes, last modified (s since the epoch) and whether it is this install's."""
    key = source_key()
    rows = []
    if base.is_dir():
        for d in base.iterdir():
            if d.is_dir() and not d.is_symlink() and _is_key(d.name):
                rows.append({"key": d.name, "bytes": _size(d), "mtime": d.stat().st_mtime,
                             "current": d.name == key})
    return sorted(rows, key=lambda r: -r["mtime"])


def current_base() -> Path:
    """The folder that holds the key folders: the parent of this process's cache."""
    return Path(os.environ["NUMBA_CACHE_DIR"]).parent
