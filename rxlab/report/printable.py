"""User-given text made safe for a terminal: a scenario or app name with an ANSI escape,
a bell, a newline or a lone surrogate is shown as its Python escape (``\\x1b``,
``\\udc80``) instead of being written raw (recolouring the terminal, breaking the
one-line error, or failing to encode), and rich's markup in it is shown as typed."""

from __future__ import annotations

import re

# C0 controls (newline and tab too: a name or an error is one line), DEL, C1 controls
# (CSI is \x9b), and surrogates, which no encoding writes
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every control character and lone surrogate escaped."""
    return _UNSAFE.sub(lambda m: repr(m.group())[1:-1], str(text))


def for_rich(text: str) -> str:
    """``printable(text)`` with rich's markup brackets escaped: '[/]' as typed, not a
    MarkupError, '[red]' as typed, not red."""
    from rich.markup import escape

    return escape(printable(text))


def terminal_result(d: dict) -> dict:
    """A result's dict for the terminal tables: the names a user gave (scenario, apps,
    traffic groups) made printable; the JSON output keeps them as they are."""
    out = dict(d, scenario=for_rich(d["scenario"]))
    out["apps"] = [dict(a, app=for_rich(a["app"])) for a in d.get("apps", [])]
    out["tasks"] = [dict(t, task=for_rich(t["task"])) for t in d.get("tasks", [])]
    if "flows_by_group" in d:
        out["flows_by_group"] = {for_rich(k): v for k, v in d["flows_by_group"].items()}
    return out
