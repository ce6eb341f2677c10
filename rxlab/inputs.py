"""Reading user files safely: a size limit, strict UTF-8 and one-line errors.

Every file a user hands rxlab (scenarios, cost profiles, sweep specs, rollback files)
goes through ``read_text``: a device such as /dev/zero is refused instead of read
forever, a file too large for its kind is refused before it is read, and text that is
not UTF-8 is a one-line ``UsageError`` naming the file and the byte offset.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from rxlab.errors import UsageError

MAX_TEXT_BYTES = 16 << 20  # far above any scenario, profile or rollback file


def read_bytes(path: str | Path, what: str = "file", max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, else a one-line UsageError."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise UsageError(f"{p}: no such {what}") from None
    except OSError as err:
        raise UsageError(f"{p}: cannot read the {what} ({err.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{p}: is a directory; give a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{p}: not a regular file (a device or a pipe); give a {what}")
    if st.st_size > max_bytes:
        raise UsageError(
            f"{p}: {st.st_size:,} bytes, more than a {what} may have ({max_bytes:,})")
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may have grown since stat
    except OSError as err:
        raise UsageError(f"{p}: cannot read the {what} ({err.strerror})") from None
    if len(data) > max_bytes:
        raise UsageError(f"{p}: more than a {what} may have ({max_bytes:,} bytes)")
    return data


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The text of a UTF-8 file (a BOM is allowed), else a one-line UsageError."""
    data = read_bytes(path, what, max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{path}: not UTF-8 text (byte {err.start}); save the {what} as UTF-8") from None
    if "\x00" in text:
        raise UsageError(
            f"{path}: contains a NUL byte (offset {text.index(chr(0))}); a {what} is text")
    return text


MAX_JSON_DEPTH = 32  # rxlab's own JSON files (results, sweep records, runs) nest <= 8 deep


def read_json(path: str | Path, what: str = "file", max_bytes: int = MAX_TEXT_BYTES,
              fix: str = "", allow_nan: bool = False):
    """A JSON file read as ``read_text`` reads text, nested at most MAX_JSON_DEPTH deep
    (100,000 nested arrays raised RecursionError) and, unless ``allow_nan``, without
    NaN or Infinity; else a one-line UsageError ending with ``fix``."""
    text = read_text(path, what, max_bytes)
    tail = f"; {fix}" if fix else ""
    try:
        data = json.loads(text, parse_constant=None if allow_nan else _no_constant)
    except RecursionError:
        data = None
        deep = True
    except ValueError as err:
        raise UsageError(f"{path}: not a {what} ({err}){tail}") from None
    else:
        deep = _too_deep(data)
    if deep:
        raise UsageError(f"{path}: not a {what} (nested deeper than {MAX_JSON_DEPTH} "
                         f"levels){tail}")
    return data


def _no_constant(name: str):
    raise ValueError(f"{name} is not a value here")


def _too_deep(data) -> bool:
    """Containers nested past MAX_JSON_DEPTH, found without recursion."""
    stack = [(data, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict | list):
            if d > MAX_JSON_DEPTH:
                return True
            stack.extend((v, d + 1) for v in (node.values() if isinstance(node, dict)
                                               else node))
    return False
