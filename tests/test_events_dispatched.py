"""Every event kind declared in rxlab/kernel/events.py is dispatched by
rx_loop.handle_event (an explicit chain, as numba needs), and has its profile site
(rxlab/kernel/profile.py: ev_<name>, in the order of the kinds' values)."""

import ast
import inspect

from rxlab.kernel import events, rx_loop
from rxlab.kernel.profile import P_EV0, SITES


def kinds() -> dict[str, int]:
    return {n: v for n, v in vars(events).items() if n.startswith("EV_")}


def dispatched() -> set[str]:
    """The EV_ names handle_event compares ``kind`` with."""
    tree = ast.parse(inspect.getsource(rx_loop.handle_event.py_func))
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)
                and node.left.id == "kind"):
            out |= {c.id for c in node.comparators if isinstance(c, ast.Name)}
    return out


def test_every_kind_is_dispatched_once_and_numbered_from_1():
    k = kinds()
    assert sorted(k.values()) == list(range(1, len(k) + 1))  # P_EV0 + kind - 1 indexing
    assert dispatched() == set(k)


def test_every_kind_has_its_profile_site():
    names = [n for n, _ in SITES]
    for name, v in kinds().items():
        assert names[P_EV0 + v - 1] == "ev_" + name.removeprefix("EV_").lower(), name
