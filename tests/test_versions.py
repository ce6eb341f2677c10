"""Version rules live in rxlab/kernel/versions.py alone: every behaviour that changed
between kernels is a flag of KernelBehaviour, and no other module compares versions."""

import ast
import re
from pathlib import Path

import pytest

from rxlab.kernel.versions import KernelBehaviour, behaviour

RXLAB = Path(__file__).resolve().parent.parent / "rxlab"
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _is_version_literal(node: ast.AST) -> bool:
    """(6, 15), or a "6.15"-like string: what a version comparison is written with."""
    if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
        return all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and re.fullmatch(r"\d+\.\d+(\.\d+)?", node.value) is not None


def version_comparisons(path: Path, root: Path = RXLAB.parent) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, ORDER) for op in node.ops):
            if any(_is_version_literal(n) for n in [node.left, *node.comparators]):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_no_version_comparison_outside_versions_py():
    found = [hit for p in sorted(RXLAB.rglob("*.py")) if p.name != "versions.py"
             for hit in version_comparisons(p)]
    assert found == [], "compare versions in rxlab/kernel/versions.py (a flag): " + ", ".join(found)


def test_the_scan_finds_a_version_comparison(tmp_path):
    """The scan above is not vacuous: both spellings of a comparison are caught."""
    f = tmp_path / "probe.py"
    f.write_text("a = kb.version >= (6, 15)\nb = '6.5' < k\nc = x < (1, 2)[0]\nd = y == (6, 5)\n")
    assert version_comparisons(f, tmp_path) == ["probe.py:1", "probe.py:2"]


@pytest.mark.parametrize("text,flags", [
    ("6.14", dict(rfs_hash32=False, cpumap_gro=False, rps_dev_flow_hash=False)),
    ("6.15", dict(rfs_hash32=True, cpumap_gro=True, rps_dev_flow_hash=False)),
    ("6.18.2", dict(rps_dev_flow_hash=True, rps_flow_cnt_limit=1 << 32)),
    ("7.1", dict(rps_flow_cnt_limit=1 << 27)),
    ("6.4", dict(inet6_hash_whole=False, ksoftirqd_defers=True, softnet_columns=15)),
    ("6.5", dict(inet6_hash_whole=True, ksoftirqd_defers=False)),
    ("4.8", dict(ksoftirqd_defers=False, softnet_columns=13 - 2)),
])
def test_flags_change_at_the_release_that_changed_the_kernel(text, flags):
    kb = behaviour(text)
    assert isinstance(kb, KernelBehaviour)
    assert {k: getattr(kb, k) for k in flags} == flags
