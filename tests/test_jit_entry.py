"""Compiled functions built without a CPython wrapper are never called from Python.

``rxlab.config.JIT_INNER`` drops numba's CPython wrapper (it would unbox the whole state
``s``); the dispatcher of such a function has no entry point Python can call, and calling
it from Python would crash the interpreter. So: every such function takes the state ``s``
(which only compiled code holds), and no function that numba does not compile calls one
by name, anywhere in the package, its tests or its benchmarks.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
from pathlib import Path

from numba.core.registry import CPUDispatcher

import rxlab

ROOT = Path(rxlab.__file__).parent
REPO = ROOT.parent


def _inner_dispatchers():
    found = {}
    for mod in pkgutil.walk_packages([str(ROOT)], "rxlab."):
        m = importlib.import_module(mod.name)
        for name, obj in vars(m).items():
            if isinstance(obj, CPUDispatcher) and obj.targetoptions.get("no_cpython_wrapper"):
                if obj.py_func.__module__ == m.__name__:
                    found[name] = obj
    return found


INNER = _inner_dispatchers()


def test_there_are_wrapperless_functions():
    # the mechanisms that take ``s``: if this falls to zero the config changed
    assert len(INNER) > 30


def test_each_takes_the_state():
    for name, d in INNER.items():
        first = next(iter(inspect.signature(d.py_func).parameters))
        assert first == "s", f"{d.py_func.__module__}.{name} has no CPython wrapper " \
                             f"but its first argument is {first!r}, not the state s"


def _jitted(node: ast.AST) -> bool:
    for dec in getattr(node, "decorator_list", []):
        f = dec.func if isinstance(dec, ast.Call) else dec
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def _python_calls(tree: ast.AST):
    """(line, name) of every call, outside a numba-compiled function, of a name imported
    from rxlab (``f(...)``) or an attribute of an imported rxlab module (``m.f(...)``)."""
    names, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rxlab"):
            for a in node.names:
                obj = getattr(importlib.import_module(node.module), a.name, None)
                (modules if isinstance(obj, types.ModuleType) else names).add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("rxlab"))
    out = []

    def walk(node, compiled):
        for child in ast.iter_child_nodes(node):
            c = compiled or (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                             and _jitted(child))
            if isinstance(child, ast.Call) and not c:
                f = child.func
                if isinstance(f, ast.Name) and f.id in names:
                    out.append((child.lineno, f.id))
                elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                        and f.value.id in modules:
                    out.append((child.lineno, f.attr))
            walk(child, c)

    walk(tree, False)
    return out


def test_no_python_caller():
    files = [*ROOT.rglob("*.py"), *(REPO / "tests").glob("*.py"),
             *(REPO / "benchmarks").glob("*.py")]
    bad = []
    for path in files:
        for line, name in _python_calls(ast.parse(path.read_text())):
            if name in INNER:
                bad.append(f"{path.relative_to(REPO)}:{line} calls {name}")
    assert not bad, "; ".join(bad)


def test_the_check_finds_a_python_caller():
    # the scan itself: a plain function calling a wrapperless name is reported,
    # a compiled one is not
    name = next(iter(INNER))
    mod = INNER[name].py_func.__module__
    src = f"from numba import njit\nfrom {mod} import {name}\n\n@njit\ndef ok(s):\n" \
          f"    {name}(s)\n\n\ndef bad(s):\n    return {name}(s)\n"
    calls = [n for _, n in _python_calls(ast.parse(src)) if n == name]
    assert calls == [name]
