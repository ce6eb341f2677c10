"""The AF_XDP forwarding model lives outside the compiled host simulator: nothing in the
folders the numba cache key hashes imports it, and it uses no numba itself, so leaving it
out of the key can never load a stale compiled loop."""

import ast
from pathlib import Path

import rxlab
from rxlab._cache import JITTED_DIRS

ROOT = Path(rxlab.__file__).parent


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_afxdp_not_in_the_cache_key_folders():
    assert "afxdp" not in JITTED_DIRS
    assert (ROOT / "afxdp" / "forward.py").is_file()


def test_jitted_folders_do_not_import_afxdp():
    files = [ROOT / "config.py"] + [f for d in JITTED_DIRS for f in (ROOT / d).rglob("*.py")]
    bad = [str(f.relative_to(ROOT)) for f in files
           if any(m == "rxlab.afxdp" or m.startswith("rxlab.afxdp.") for m in _imports(f))]
    assert bad == []


def test_afxdp_uses_no_numba():
    bad = [f.name for f in (ROOT / "afxdp").rglob("*.py")
           if any(m == "numba" or m.startswith("numba.") for m in _imports(f))]
    assert bad == []
