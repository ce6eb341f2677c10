"""Reading user files safely: a size limit, strict UTF-8 and one-line errors.

Every file a user hands rxlab (scenarios, cost profiles, sweep specs, rollback files)
goes through ``read_text``: a device such as /dev/zero is refused instead of read
forever, a file too large for its kind is refused before it is read, and text that is
not UTF-8 is a one-line ``UsageError`` naming the file and the byte offset. YAML and
JSON text (``parse_yaml``, ``load_yaml``) is parsed with the same care: bounded depth and
alias expansion, unique keys, integers that remember how they were written.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.reader import Reader

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


MAX_YAML_DEPTH = 64  # a scenario nests about 6 deep; PyYAML composes recursively
MAX_YAML_NODES = 1 << 22  # values after alias expansion (an alias bomb expands to 10^9)


# ------------------------------------------------------------------ YAML


class YamlInt(int):
    """An int from YAML that remembers how it was written ('010', '0x10', '10')."""

    def __new__(cls, value: int, text: str | None = None):
        obj = super().__new__(cls, value)
        obj.yaml_text = str(int(value)) if text is None else text
        return obj


class YamlFloat(float):
    """A float from YAML that remembers how it was written ('6.10', '1e-3')."""

    def __new__(cls, value: float, text: str | None = None):
        obj = super().__new__(cls, value)
        obj.yaml_text = repr(float(value)) if text is None else text
        return obj


yaml.SafeDumper.add_representer(YamlInt, yaml.SafeDumper.represent_int)
yaml.SafeDumper.add_representer(YamlFloat, yaml.SafeDumper.represent_float)


class _TooMuch(yaml.MarkedYAMLError):
    pass


class _Loader(yaml.SafeLoader):
    """SafeLoader whose numbers keep their text; nesting and alias expansion bounded
    (PyYAML composes recursively: 20,000 nested '[' would exhaust Python's stack)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _TooMuch(problem=f"nested deeper than {MAX_YAML_DEPTH} levels, rxlab's "
                               "limit for its files", problem_mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _expanded(node, {}, set())
        return node


def _expanded(node, memo: dict, path: set) -> tuple[int, int]:
    """(values, depth) of a node with aliases expanded; too many or a cycle is an error."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in path:
        raise _TooMuch(problem="an alias refers to a node that contains it (a cycle)",
                       problem_mark=node.start_mark)
    n, depth = 1, 1
    if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
        path.add(key)
        kids = node.value if isinstance(node, yaml.SequenceNode) else [
            x for kv in node.value for x in kv]
        for kid in kids:
            kn, kd = _expanded(kid, memo, path)
            n, depth = n + kn, max(depth, kd + 1)
        path.discard(key)
    if n > MAX_YAML_NODES or depth > MAX_YAML_DEPTH:
        what = (f"more than {MAX_YAML_NODES:,} values" if n > MAX_YAML_NODES
                else f"nesting deeper than {MAX_YAML_DEPTH} levels")
        raise _TooMuch(problem=f"aliases expand to {what}", problem_mark=node.start_mark)
    memo[key] = (n, depth)
    return n, depth


def _int(loader, node):
    try:
        return YamlInt(yaml.SafeLoader.construct_yaml_int(loader, node), node.value)
    except ValueError:  # more digits than Python converts (sys.int_info.str_digits_check)
        raise _TooMuch(problem=f"an integer of {len(node.value):,} characters; no field "
                       "takes one that long", problem_mark=node.start_mark) from None


def _float(loader, node):
    return YamlFloat(yaml.SafeLoader.construct_yaml_float(loader, node), node.value)


def _timestamp(loader, node):
    # no rxlab field is a date: an unquoted 2001-12-14 stays the text it is (and an
    # impossible one such as 2001-13-45 is not a ValueError from datetime)
    return loader.construct_scalar(node)


def _unique_keys(loader, node) -> None:
    """A key given twice in one mapping is an error (YAML 1.2 requires unique keys;
    PyYAML keeps the last one silently). Keys merged in with '<<' may be overridden."""
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node,
                                                                       yaml.ScalarNode):
            continue
        key = key_node.value
        if key in seen:
            raise _TooMuch(problem=f"key {key!r} given twice (first on line {seen[key] + 1}); "
                           "keep one", problem_mark=key_node.start_mark)
        seen[key] = key_node.start_mark.line


def _construct_map(loader, node):
    _unique_keys(loader, node)
    return (yield from yaml.SafeLoader.construct_yaml_map(loader, node))


_Loader.add_constructor("tag:yaml.org,2002:int", _int)
_Loader.add_constructor("tag:yaml.org,2002:float", _float)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)


def yaml_problem(err: yaml.YAMLError) -> str:
    """'line N: problem' on one line."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark else ""
    problem = getattr(err, "problem", None) or str(err)
    return where + " ".join(str(problem).split())


class _NotPlain(Exception):
    pass


_RESOLVER = yaml.resolver.Resolver()  # the implicit types _Loader resolves
_SURROGATE = re.compile(r"\\u[dD][89abAB]")  # \uD800-\uDBFF: JSON pairs them, YAML does not


def _json_float(text: str) -> float:
    if _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) != "tag:yaml.org,2002:float":
        raise _NotPlain  # e.g. 1e-05: a string to YAML 1.1
    return YamlFloat(float(text), text)


def _json_pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs) or any(len(k) > 1000 for k in out):
        raise _NotPlain  # a key twice (YAML's error), or past YAML's simple-key length
    return out


def _json_size(data: Any, depth: int = 1) -> int:
    if depth > MAX_YAML_DEPTH // 2:
        raise _NotPlain
    if isinstance(data, dict):
        return 1 + sum(1 + _json_size(v, depth + 1) for v in data.values())
    if isinstance(data, list):
        return 1 + sum(_json_size(v, depth + 1) for v in data)
    return 1


def _plain_json(text: str) -> Any:
    """``text`` as ``json.dumps`` writes it (one line or indent=2), read by the json
    module: the same data as the YAML reader gives (JSON is YAML), numbers keeping their
    text, in milliseconds instead of seconds for a large generated scenario. Anything
    else, or anything where YAML 1.1 reads JSON differently, raises _NotPlain."""
    if text[:1] not in "{[" or _SURROGATE.search(text) or Reader.NON_PRINTABLE.search(text):
        raise _NotPlain
    try:
        data = json.loads(text, parse_int=lambda t: YamlInt(int(t), t), parse_float=_json_float,
                          parse_constant=_json_constant, object_pairs_hook=_json_pairs)
    except (ValueError, RecursionError):
        raise _NotPlain from None
    if _json_size(data) > MAX_YAML_NODES // 2:
        raise _NotPlain
    body = text.strip()  # json.dumps writes a newline only with indent
    if body != json.dumps(data, indent=2 if "\n" in body else None):
        raise _NotPlain  # other spacing or escapes: leave the reading to YAML
    return data


def _json_constant(text: str):
    raise _NotPlain  # NaN, Infinity: plain strings to YAML


def parse_yaml(text: str, source: str) -> Any:
    """YAML text -> data, numbers keeping their text; bad YAML is a one-line UsageError."""
    try:
        return _plain_json(text)
    except _NotPlain:
        pass
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        raise UsageError(f"{source}: malformed YAML ({yaml_problem(err)})") from None
    except RecursionError:
        raise UsageError(f"{source}: malformed YAML (nested too deeply)") from None


def load_yaml(path: str | Path, missing: str = "no such scenario file; give a path or a "
              "built-in name") -> Any:
    """Parse a YAML file; a missing, unreadable or malformed file is a one-line UsageError."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise UsageError(f"{p}: {missing}")
    return parse_yaml(read_text(p, "YAML file"), str(p))
