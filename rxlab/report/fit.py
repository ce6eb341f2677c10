"""Tables that fit the terminal, and numbers in units chosen per magnitude.

A rich table wider than the console folds or cuts its cells, and a cut number reads as
another number ("3,351,7" / "78"). ``print_fitted`` never lets that happen: a number
cell is never wrapped, headers may wrap at spaces, and when the columns
do not fit the width they are split into several tables that each repeat the key
columns (the way ``less -S`` users page sideways, but on paper). Past that, when even
one value column does not fit beside the keys, each row is printed as a list of
``header: value`` lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

# rich's default box: "│ " before each column, " │" after the last
_COLUMN_OVERHEAD, _TABLE_OVERHEAD = 3, 1
_HEADER_BREAK = re.compile(r"\s+")  # rich wraps headers at spaces only


def _pieces(word: str) -> list[str]:
    """A header word cut after each underscore ('flow_limit_count' -> 'flow_', 'limit_',
    'count'): a counter's name may break there, so its column is as wide as its values,
    not its name (run's table at 120 columns kept a lone flow_limit_count part)."""
    return re.findall(r"[^_]*_|[^_]+$", word) or [word]


def _header_min(h: str, cut: bool = False) -> int:
    """The narrowest the header may be: its longest word, or with ``cut`` its longest
    piece between underscores."""
    words = _HEADER_BREAK.split(h)
    return max((len(p) for w in words for p in (_pieces(w) if cut else [w])), default=0)


def _wrap_header(h: str, width: int) -> str:
    """The header's words greedily on lines of ``width`` (rich then needs no wrapping),
    a word broken after an underscore only when it does not fit whole."""
    lines: list[str] = []
    for w in _HEADER_BREAK.split(h):
        if lines and len(lines[-1]) + 1 + len(w) <= width:
            lines[-1] += " " + w
        elif len(w) <= width:
            lines.append(w)
        else:
            for j, p in enumerate(_pieces(w)):
                if j and len(lines[-1]) + len(p) <= width:
                    lines[-1] += p
                else:
                    lines.append(p)
    return "\n".join(lines)


def _widths(headers: Sequence[str], rows: Sequence[Sequence[str]],
            cut: bool = False) -> list[int]:
    out = []
    for i, h in enumerate(headers):
        cell = max((len(r[i]) for r in rows), default=0)
        out.append(max(cell, min(len(h), max(cell, _header_min(h, cut)))))
    return out


def _fewer_parts(headers, rows, keys: int, width: int, widths: list[int],
                 parts: list | None) -> tuple[list[int], list | None]:
    """Names cut after underscores, when only that saves a part (a wide console keeps
    'ring_full' whole)."""
    if parts is not None and len(parts) == 1:
        return widths, parts
    cut = _widths(headers, rows, cut=True)
    fewer = _parts(cut, keys, width)
    if fewer is not None and (parts is None or len(fewer) < len(parts)):
        return cut, fewer
    return widths, parts


def _parts(widths: list[int], keys: int, width: int) -> list[list[int]] | None:
    """Column index groups, each holding the key columns and as many others as fit."""
    base = _TABLE_OVERHEAD + sum(w + _COLUMN_OVERHEAD for w in widths[:keys])
    parts: list[list[int]] = []
    cur: list[int] = []
    used = base
    for i in range(keys, len(widths)):
        need = widths[i] + _COLUMN_OVERHEAD
        if base + need > width:
            return None  # one value column beside the keys is already too wide
        if used + need > width and cur:
            parts.append(cur)
            cur, used = [], base
        cur.append(i)
        used += need
    if cur or not parts:
        parts.append(cur)
    return [list(range(keys)) + p for p in parts]


def print_fitted(console: Console, title: str, headers: Sequence[str],
                 rows: Sequence[Sequence[str]], *, keys: int = 1,
                 justify: Sequence[str] | None = None, show_header: bool = True) -> None:
    """Print ``rows`` (strings) under ``headers`` within ``console.width`` columns."""
    rows = [[str(c) for c in r] for r in rows]
    widths = _widths(headers, rows)
    justify = list(justify or ["left"] * keys + ["right"] * (len(headers) - keys))
    parts = _parts(widths, keys, console.width)
    legend = _abbreviated(headers, rows, keys, console.width, parts)
    if legend:
        rows = [[f"#{i + 1}", *r[1:]] for i, r in enumerate(rows)]
        widths = _widths(headers, rows)
        parts = _parts(widths, keys, console.width)
    widths, parts = _fewer_parts(headers, rows, keys, console.width, widths, parts)
    if parts is None:
        _print_records(console, title, headers, rows, keys)
        return
    for n, cols in enumerate(parts):
        suffix = f" ({n + 1}/{len(parts)})" if len(parts) > 1 else ""
        t = Table(title=f"{title}{suffix}" if title else None, show_header=show_header)
        for i in cols:
            t.add_column(_wrap_header(headers[i], widths[i]), justify=justify[i],
                         width=widths[i], no_wrap=True)
        for r in rows:
            t.add_row(*(r[i] for i in cols))
        console.print(t)
    for i, key in enumerate(legend):
        print_wrapped(console, key, f"  #{i + 1:<{len(str(len(legend)))}} ")


def _abbreviated(headers: Sequence[str], rows: list[list[str]], keys: int, width: int,
                 parts: list | None) -> list[str]:
    """The key cells, when numbering them (#1, #2, ... and a legend below the table)
    saves a part: a wide key such as a flow's 5-tuple repeated in every part of a split
    table takes the room of the values. [] when numbering does not help."""
    if keys != 1 or not rows or (parts is not None and len(parts) == 1):
        return []
    short = [[f"#{i + 1}", *r[1:]] for i, r in enumerate(rows)]
    fewer = _parts(_widths(headers, short), keys, width)
    if fewer is None or (parts is not None and len(fewer) >= len(parts)):
        return []
    return [r[0] for r in rows]


def _print_records(console: Console, title: str, headers: Sequence[str],
                   rows: Sequence[Sequence[str]], keys: int) -> None:
    if title:
        console.print(title, style="italic", highlight=False)
    for r in rows:
        console.print(" ".join(r[:keys]), style="bold", highlight=False)
        for h, v in zip(headers[keys:], r[keys:], strict=True):
            console.print(f"  {h}: {v}", highlight=False, soft_wrap=True)


def print_wrapped(console: Console, text: str, first: str = "", rest: str | None = None,
                  style: str | None = None) -> None:
    """A paragraph within ``console.width``, its later lines indented by ``rest`` (rich
    alone wraps at the edge with no indent, so a step's text runs into the next step's
    name). A word longer than the line (a path) is kept whole."""
    import textwrap

    rest = " " * len(first) if rest is None else rest
    lines = textwrap.wrap(" ".join(text.split()), console.width, initial_indent=first,
                          subsequent_indent=rest, break_long_words=False,
                          break_on_hyphens=False) or [first]
    for line in lines:
        console.print(line, style=style, highlight=False, markup=False, soft_wrap=True)


# ---------------------------------------------------------------- units ------------
def fmt_time_ns(ns: float | None) -> str:
    """850 ns, 12.3 us, 4.56 ms, 1.23 s."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    return _scaled(ns, ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1, "ns")))


def fmt_rate(pps: float | None) -> str:
    """950 pps, 12.3 Kpps, 1.64 Mpps."""
    if pps is None or (isinstance(pps, float) and math.isnan(pps)):
        return "–"
    return _scaled(pps, ((1e9, "Gpps"), (1e6, "Mpps"), (1e3, "Kpps"), (1, "pps")))


def fmt_per_s(n: float | None) -> str:
    """Events (interrupts), not packets, per second: 40 /s, 623 K/s."""
    return fmt_rate(n).replace("pps", "/s")


def _scaled(v: float, units: tuple) -> str:
    """``v`` in the largest unit it reaches, to 3 digits; one that rounds up to 1000 of
    a unit is 1 of the next (999,999.9 pps is "1 Mpps", not "1e+03 Kpps")."""
    a = abs(v)
    for i, (div, unit) in enumerate(units):
        if a >= div or div == 1:
            text = f"{v / div:.3g}" if div != 1 else f"{v:.0f}"
            if i and abs(float(text)) >= 1000:
                return f"{v / units[i - 1][0]:.3g} {units[i - 1][1]}"
            if abs(float(text)) >= 1000:  # the largest unit: whole, not "1e+03 s"
                text = f"{v / div:,.0f}"
            return f"{text} {unit}"
    return f"{v:.0f} {units[-1][1]}"


def fmt_count(n: float | None) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "–"
    if float(n).is_integer():
        return f"{int(n):,}"
    return f"{n:,.1f}" if abs(n) >= 10 else f"{n:.3g}"


def fmt_metric(key: str, v: float | None, *, ci: bool = False) -> str:
    """A value in the unit its metric name implies (``*_ns``/latency: time; ``*pps``:
    rate; utilisation, idle and other 0..1 shares: percent; otherwise a count).
    ``ci`` marks a half-width, which keeps the unit of its mean."""
    k = key.lower()
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if "latency" in k or k.endswith("_ns") or ".p50" in k or ".p99" in k or k.endswith(".mean"):
        return fmt_time_ns(v)
    if k.endswith("pps") or "_pps" in k:
        return fmt_rate(v)
    if any(s in k for s in ("util", "idle", "share", "fraction", "_frac")):
        return f"{100 * v:.2f} %" if ci or abs(v) < 0.001 else f"{100 * v:.1f} %"
    return fmt_count(v)
