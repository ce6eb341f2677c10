"""``rxlab cache [--prune [--yes]] [--json]``: numba's compiled event loops on disk, per
version (key folder) and, for this version, per checkout path that compiled it.

rxlab keys numba's cache folder by the source of its jitted code (``rxlab._cache``), so
every upgrade or engine edit compiles into a new folder (5-60 MB each) and leaves the
old one behind; numba keeps, inside a key folder, folders per checkout path, so each
checkout of the same version compiles again. ``--prune`` lists the folders of other
versions and of this version's checkouts whose path no longer exists (recorded when a
checkout compiles: ``rxlab._cache.record_checkout``); ``--yes`` deletes them.
The folder of this install is never deleted, nor a folder holding anything but numba's
cache files (``*.nbi``, ``*.nbc``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "cache", help="numba's compiled event loops on disk; --prune removes old ones",
        description=__doc__.splitlines()[0].split(": ", 1)[1] + " Every upgrade or edit of "
                    "rxlab's jitted code compiles into a new folder; --prune lists the "
                    "folders of other versions (a dry run), --prune --yes deletes them.")
    p.add_argument("--prune", action="store_true",
                   help="list the folders of other rxlab versions (dry run)")
    p.add_argument("--yes", action="store_true", help="with --prune: delete them")
    p.add_argument("--dir", metavar="FOLDER",
                   help="the cache folder to look at (default: the one rxlab uses now)")
    p.add_argument("--json", action="store_true", help="print the folders as JSON")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from rxlab import _cache
    from rxlab.errors import UsageError

    if args.yes and not args.prune:
        raise UsageError("cache: --yes only goes with --prune (rxlab cache --prune --yes)")
    base = Path(args.dir) if args.dir else _cache.current_base()
    if args.dir and not base.is_dir():
        raise UsageError(f"cache: --dir {args.dir}: no such folder; give the folder that "
                         "holds the 16-hex-digit key folders (~/.cache/rxlab/numba)")
    rows = _cache.folders(base)
    # a folder of another version is deleted only when it holds numba's files alone: a
    # file the user put there (notes, a symlink) keeps the whole folder
    kept = [r for r in rows if not r["current"] and r["foreign"]]
    old = [r for r in rows if not r["current"] and not r["foreign"]]
    # this version's folder: the checkouts that compiled into it, by path; those whose
    # path no longer exists are pruned like old versions
    for r in rows:
        r["checkouts"] = _cache.checkouts(base / r["key"]) if r["current"] else []
    gone = [c for r in rows for c in r["checkouts"] if c["exists"] is False]
    deleted = []
    if args.prune and args.yes:
        for r in old:
            _delete(base / r["key"])  # only 16-hex-digit folders, never a symlink
            deleted.append(r["key"])
        cur = base / _cache.source_key()
        for c in gone:
            for name in c["folders"]:
                _delete(cur / name)
            deleted.append(c["path"])
        if gone:
            _forget(cur, {c["path"] for c in gone})
    if args.json:
        print(json.dumps({"folder": str(base), "key": _cache.source_key(), "folders": rows,
                          "prune": ([r["key"] for r in old] + [c["path"] for c in gone]
                                    if args.prune else []),
                          "kept": [r["key"] for r in kept] if args.prune else [],
                          "deleted": deleted}, indent=1))
        return 0
    from rxlab.report.fit import print_wrapped
    from rxlab.report.tables import make_console

    con = make_console(highlight=False)
    say = lambda text, first="", rest=None: print_wrapped(con, text, first, rest)  # noqa: E731
    mb = lambda n: f"{n / 1e6:,.1f} MB"  # noqa: E731
    print(f"{base}: {len(rows)} folder(s), {mb(sum(r['bytes'] for r in rows))}")
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["mtime"]))
        print(f"  {r['key']}  {mb(r['bytes']):>10}  {when}"
              f"{'  (this version)' if r['current'] else ''}")
        for c in r["checkouts"]:
            what = ("checkouts not recorded" if c["path"] is None else
                    c["path"] + ("" if c["exists"] else " (no longer exists)"))
            say(what, f"      {mb(c['bytes']):>10}  ", " " * 18)  # a path is kept whole
    if args.prune:
        for r in kept:
            names = ", ".join(r["foreign"][:3]) + (" ..." if len(r["foreign"]) > 3 else "")
            say(f"kept {r['key']}: it holds files numba did not write ({names})")
        freed = mb(sum(r["bytes"] for r in old) + sum(c["bytes"] for c in gone))
        what = f"{len(old)} folder(s) of other versions" + (
            f" and {len(gone)} checkout(s) gone" if gone else "")
        if deleted:
            say(f"deleted {what}, {freed}")
        elif old or gone:
            say(f"dry run: --prune --yes would delete {what}, {freed}")
        else:
            print("nothing to prune")
    return 0


def _forget(key_folder: Path, paths: set[str]) -> None:
    """Drop pruned checkouts from the key folder's list."""
    from rxlab import _cache

    f = key_folder / _cache.CHECKOUTS
    left = [p for p in f.read_text().splitlines() if p not in paths]
    f.write_text("".join(p + "\n" for p in left))


def _delete(folder: Path) -> None:
    from rxlab.errors import OutputError

    try:
        shutil.rmtree(folder)
    except OSError as err:
        raise OutputError(f"cache: {folder} cannot be deleted ({err.strerror or err}); "
                          "nothing else was deleted after it") from None
