"""Point numba's cache at a folder keyed by the source of rxlab's jitted code.

numba invalidates a cached function only when *its own* file changes, but the event loop
inlines mechanisms from many files: a stale cache would silently run old code. Keying
the cache folder by a hash of the folders that hold jitted code makes any edit a fresh compile.
Must run before numba is imported (numba reads NUMBA_CACHE_DIR at import).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

#: Folders whose source the compiled event loop depends on. The AF_XDP forwarding model
#: (``rxlab/afxdp``) is pure Python with its own time loop, so it is not listed: editing it
#: never forces a recompile.
JITTED_DIRS = ("engine", "kernel", "mechanisms", "nic", "traffic", "xdp")


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
    if os.environ.get("RXLAB_PROFILE") == "1":  # the profiled loop (rxlab.engine.cycles)
        h.update(b"RXLAB_PROFILE=1")
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
        guard_cache(Path(given))
        return
    if given:
        base = Path(given)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rxlab" / "numba"
    os.environ["NUMBA_CACHE_DIR"] = str(base / key)
    guard_cache(base / key)


# Why the compile cache is off in this process (None: on). Set by guard_cache.
cache_off: str | None = None


def guard_cache(folder: Path) -> None:
    """Keep numba's cache to ``folder`` and keep a damaged entry from failing a run.

    A folder that cannot be written turns caching off (every run compiles in memory):
    numba would otherwise fall back to ``__pycache__`` beside the source, writing into
    the installed package or the checkout. An entry that does not load (truncated,
    zeroed, garbage) is removed and its function compiled again (``_load_or_repair``);
    a save the file system refuses (full, read-only) keeps the code in memory.
    """
    global cache_off
    import tempfile

    cache_off = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        cache_off = f"{folder} cannot be written: {err.strerror or err}"
    from numba.core import caching, dispatcher

    if not hasattr(caching.Cache, "_rxlab_enable"):  # once per process: numba's own
        caching.Cache._rxlab_enable = dispatcher.Dispatcher.enable_caching
        caching.Cache.load_overload = _load_or_repair(caching.Cache.load_overload)
        caching.Cache.save_overload = _save_or_skip(caching.Cache.save_overload)
    dispatcher.Dispatcher.enable_caching = (
        _no_caching if cache_off else caching.Cache._rxlab_enable)


def _no_caching(self) -> None:
    """Dispatcher.enable_caching when the cache folder cannot be written: keep
    numba's NullCache, so nothing is looked up or written anywhere."""


def _load_or_repair(load):
    def load_overload(self, sig, target_context):
        try:
            return load(self, sig, target_context)
        except Exception as err:  # noqa: BLE001 - any damage: unpickling, EOF, rebuild
            removed = _remove_entry(self)
            _notice(f"compiling {_func_name(self)} again: its compiled code in the cache "
                    f"does not load ({type(err).__name__}: {err})"
                    + ("; removed it" if removed else ""))
            return None  # numba compiles it, and saves the new code
    return load_overload


def _save_or_skip(save):
    def save_overload(self, sig, data):
        try:
            save(self, sig, data)
        except Exception as err:  # noqa: BLE001 - full or read-only disk, damaged index
            _remove_entry(self)
            _notice(f"the compiled code of {_func_name(self)} is not saved in the cache "
                    f"({type(err).__name__}: {err}); the next run compiles it again")
    return save_overload


def _remove_entry(cache) -> bool:
    """Delete a function's index and data files (numba's IndexDataCacheFile names)."""
    try:
        index = Path(cache._cache_file._index_path)
    except AttributeError:  # another numba's layout: leave the files, compile anyway
        return False
    stem = index.name.removesuffix(".nbi")
    done = True
    for f in [index, *index.parent.glob(f"{stem}.*.nbc")]:
        try:
            f.unlink(missing_ok=True)
        except OSError:
            done = False
    return done


def _func_name(cache) -> str:
    f = getattr(cache, "_py_func", None)
    return f"{f.__module__}.{f.__qualname__}" if f is not None else "a function"


def _notice(text: str) -> None:
    """One line on stderr from the CLI process (library users and workers stay quiet)."""
    if os.environ.get(NOTICE_ENV) == str(os.getpid()):
        import sys

        print(f"rxlab: {text}", file=sys.stderr)


def subfolder(source_dir: Path) -> str:
    """The folder numba's cache keeps the functions of the files in ``source_dir`` in:
    the folder's name and a SHA1 of its absolute path
    (``UserProvidedCacheLocator.get_suitable_cache_subpath``), so each checkout of the
    same version compiles into folders of its own."""
    from numba.core.caching import UserProvidedCacheLocator

    return UserProvidedCacheLocator.get_suitable_cache_subpath(str(source_dir / "x.py"))


def loop_compiled(root: Path | None = None) -> bool:
    """True if numba's cache folder holds the event loop (``rx_loop.run``) compiled from
    this checkout's source (``root``: the rxlab package folder; this one by default).

    A fresh install, an edit of jitted code or another checkout of the same version
    starts without one: the first simulation then compiles for minutes, which the CLI
    announces rather than sit silent.
    """
    folder = os.environ.get("NUMBA_CACHE_DIR")
    if not folder:
        return False
    here = Path(folder) / subfolder((root or Path(__file__).parent).resolve() / "kernel")
    return here.is_dir() and any(here.glob("rx_loop.run-*.nbi"))


# In each key folder, the checkouts (rxlab package folders) that compiled into it, one
# absolute path per line, so that ``rxlab cache`` can say whose its folders are
CHECKOUTS = "rxlab-checkouts"


def record_checkout(key_folder: Path, root: Path | None = None) -> None:
    """Add this checkout's package folder to the key folder's list (once)."""
    path = str((root or Path(__file__).parent).resolve())
    f = key_folder / CHECKOUTS
    try:
        known = f.read_text().splitlines() if f.is_file() else []
        if path not in known:
            with f.open("a") as out:
                out.write(path + "\n")
    except OSError:  # a read-only or full cache: the listing then says "unrecorded"
        pass


def checkout_folders(root: Path) -> set[str]:
    """The cache subfolders a checkout at ``root`` compiles into: one per folder of the
    package that holds Python files (this install's layout: same key, same source)."""
    here = Path(__file__).parent
    dirs = {p.parent.relative_to(here) for p in here.rglob("*.py")}
    return {subfolder(root / d) for d in dirs}


def checkouts(key_folder: Path) -> list[dict]:
    """The recorded checkouts of a key folder: path, whether it still exists, the bytes
    of its subfolders; then one row (path None) for subfolders no record names."""
    f = key_folder / CHECKOUTS
    paths = f.read_text().splitlines() if f.is_file() else []
    subs = {d.name: _size(d) for d in key_folder.iterdir() if d.is_dir()
            and not d.is_symlink()} if key_folder.is_dir() else {}
    rows, claimed = [], set()
    for path in paths:
        mine = checkout_folders(Path(path)) & subs.keys()
        claimed |= mine
        rows.append({"path": path, "exists": Path(path).is_dir(),
                     "bytes": sum(subs[s] for s in mine), "folders": sorted(mine)})
    rest = sorted(subs.keys() - claimed)
    if rest:
        rows.append({"path": None, "exists": None, "bytes": sum(subs[s] for s in rest),
                     "folders": rest})
    return rows


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
    if cache_off:
        _notice(f"compiling the event loop in memory, for this run only (the compile "
                f"cache folder {cache_off}): about a minute and a half of CPU and 0.8 GB of "
                "memory on 2 vCPUs; make the folder writable, or set NUMBA_CACHE_DIR to one "
                "that is")
    elif not loop_compiled():
        record_checkout(Path(os.environ["NUMBA_CACHE_DIR"]))
        _notice("compiling the event loop for this checkout, once: about a minute and a "
                "half of CPU and 0.8 GB of memory on 2 vCPUs (later runs start in under a "
                "second)")


def _is_key(name: str) -> bool:
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


# what numba's cache writes: index (.nbi) and data (.nbc) files, and their temporary
# names while a save is under way (caching.IndexDataCacheFile._open_for_write)
_NUMBA_FILE = re.compile(r".+\.nb[ic](\.tmp\.[0-9a-f]+)?")


def foreign_files(folder: Path) -> list[str]:
    """What under ``folder`` numba's cache did not write (a symlink counts), as paths
    relative to it: a folder holding any is not rxlab's to delete."""
    out = []
    for root, dirs, files in os.walk(folder):  # symlinked folders are listed, not entered
        for name in sorted(dirs) + sorted(files):
            p = Path(root) / name
            if p.is_symlink() or (name in files and not (p.is_file() and (
                    _NUMBA_FILE.fullmatch(name) or (root == str(folder)
                                                    and name == CHECKOUTS)))):
                out.append(str(p.relative_to(folder)))
    return out


def folders(base: Path) -> list[dict]:
    """The compiled-code folders under ``base`` (one per source key), newest first:
    name, bytes, last modified (s since the epoch), whether it is this install's, and
    the files in it that numba did not write (``foreign``)."""
    key = source_key()
    rows = []
    if base.is_dir():
        for d in base.iterdir():
            if d.is_dir() and not d.is_symlink() and _is_key(d.name):
                rows.append({"key": d.name, "bytes": _size(d), "mtime": d.stat().st_mtime,
                             "current": d.name == key, "foreign": foreign_files(d)})
    return sorted(rows, key=lambda r: -r["mtime"])


def current_base() -> Path:
    """The folder that holds the key folders: the parent of this process's cache."""
    return Path(os.environ["NUMBA_CACHE_DIR"]).parent
