"""A seed's whole posted table beside the model's, row by row (within 80 columns).

Input is the ``seed_table`` dict an experiment returns (``rows``, each with
``rps_flow_cnt`` -> size -> ``seed`` / ``model`` and ``512_over_2048``): the seed's
original and patched values, then the model's mean and 95 % interval, and the ratios
that compare without the seed's unknown load (patched/original, the small table over
the large one).
"""

from __future__ import annotations

import math

from rich.console import Console

from rxlab.report.fit import print_fitted

NOT_MODELLED = "not modelled"
UNDEFINED = "–"  # a ratio with a zero count under it


def num(x: float | None, sig: int = 3) -> str:
    """214, 22.7, 1441, 310K, 1.1M, 1.2e-4: ``sig`` significant digits, K/M past 10^4."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return UNDEFINED
    a = abs(x)
    if a >= 1e4:
        div, unit = (1e9, "G") if a >= 1e9 else (1e6, "M") if a >= 1e6 else (1e3, "K")
        return f"{x / div:.{sig}g}{unit}"
    if a >= 10 ** sig:
        return f"{x:.0f}"
    if 0 < a < 0.01:
        return f"{x:.{sig - 1}e}".replace("e-0", "e-")
    return f"{x:.{sig}g}"


def with_half(stat: dict | None) -> str:
    """``mean ±half`` of a model figure: its 95 % Student-t interval is symmetric."""
    if stat is None:
        return UNDEFINED
    lo, hi = stat["ci95"]
    half = (hi - lo) / 2
    return f"{num(stat['mean'])} ±{num(half, 2)}"


def size_rows(table: dict, size: str) -> list[list[str]]:
    rows = []
    for r in table["rows"]:
        s = r["rps_flow_cnt"][size]["seed"]
        m = r["rps_flow_cnt"][size]["model"]
        rows.append([r["row"], num(s["original"]), num(s["patched"]),
                     num(s["patched_over_original"])])
        if m is None:
            rows.append(["  model", NOT_MODELLED, "", ""])
        else:
            rows.append(["  model", with_half(m["original"]), with_half(m["patched"]),
                         with_half(m["patched_over_original"])])
    return rows


def ratio_rows(table: dict) -> list[list[str]]:
    rows = []
    for r in table["rows"]:
        s, m = r["512_over_2048"]["seed"], r["512_over_2048"]["model"]
        rows.append([r["row"], num(s["original"]), num(s["patched"])])
        rows.append(["  model", NOT_MODELLED, ""] if m is None else
                    ["  model", with_half(m["original"]), with_half(m["patched"])])
    return rows


def print_seed_table(table: dict, console: Console, width: int = 80) -> None:
    """The seed's table beside the model's: one part per rps_flow_cnt, then the 512/2048
    ratios, then the units; every part within ``width`` columns."""
    narrow = type(console)(file=console.file, width=min(width, console.width),  # ASCII stays
                     color_system=console.color_system, force_terminal=console.is_terminal,
                     highlight=False)
    kern = ", ".join(table.get("kernels") or []) or "?"
    head = (f"model: mean ±half-width of its 95 % interval over {table['seeds']} "
            f"traffic seeds, kernel {kern}")
    narrow.print(f"The seed's whole table beside the model's ({head})", highlight=False)
    for size in table["rows"][0]["rps_flow_cnt"]:
        print_fitted(narrow, f"rps_flow_cnt {size}: seed, then model",
                     ["row", "original", "patched", "patched / original"],
                     size_rows(table, size))
    print_fitted(narrow, "rps_flow_cnt 512 over 2048: seed, then model",
                 ["row", "original 512/2048", "patched 512/2048"], ratio_rows(table))
    narrow.print("Units:", highlight=False)
    units: dict[str, list[str]] = {}
    for r in table["rows"]:
        units.setdefault(r["unit"], []).append(r["row"])
    for unit, names in units.items():
        narrow.print(f"  {', '.join(names)}: {unit}", highlight=False)
    narrow.print(f"  {UNDEFINED}: a ratio over a zero count.", highlight=False)
    for note in table.get("notes", ()):
        narrow.print(note, highlight=False)
    if table.get("budget"):
        print_budget(table["budget"], narrow)
    narrow.print(f"Seed: {table['source']}", highlight=False)


def _us(ns: float | None) -> str:
    return UNDEFINED if ns is None else f"{num(ns / 1e3)} us"


def _stat_us(stat: dict | None) -> str:
    if stat is None:
        return UNDEFINED
    lo, hi = stat["ci95"]
    return f"{num(stat['mean'] / 1e3)} ±{num((hi - lo) / 2e3, 2)} us"


def _times(stat: dict | None) -> str:
    return UNDEFINED if stat is None else f"{with_half(stat)}x"


# (label, side of the budget, the cell from that side's figures for one rps_flow_cnt)
BUDGET_ROWS = (
    ("seed: CPUs saved", "seed",
     lambda v: f"{num(v['cpu_saved_cpus'])} ({num(v['saving_pct'])} %)"),
    ("seed: aRFS calls removed / s", "seed", lambda v: num(v["steer_calls_removed_per_s"])),
    ("seed: CPU per removed call", "seed", lambda v: _us(v["cost_per_removed_call_ns"])),
    ("  x the profile's cost of an update", "seed",
     lambda v: f"{num(v['times_profile_update_cost'])}x"),
    ("seed: user time, patched/original", "seed", lambda v: num(v["user_ratio"])),
    ("seed: saving per unit of user time", "seed",
     lambda v: f"{num(v['saving_per_user_time_pct'])} %"),
    ("model: CPUs short of half the saving", "model", lambda v: with_half(v["missing_cpus"])),
    ("model: away packets removed / s", "model",
     lambda v: with_half(v["away_packets_removed_per_s"])),
    ("model: extra cost needed per one", "model",
     lambda v: _stat_us(v["extra_cost_per_away_packet_ns"])),
    ("  x the profile's per-packet cost", "model",
     lambda v: _times(v["times_profile_packet_cost"])),
)


def budget_rows(budget: dict) -> list[list[str]]:
    """The ``budget`` of a seed table (seed 000: what the seed's CPU saving would need),
    one row per figure, one column per rps_flow_cnt."""
    sizes = budget["rps_flow_cnt"]
    return [[label, *(cell(sizes[n][side]) for n in sizes)] for label, side, cell in BUDGET_ROWS]


def print_budget(budget: dict, console: Console) -> None:
    stages = ", ".join(f"{k} {num(v)} ns" for k, v in budget["stages"].items())
    print_fitted(console, "What the seed's CPU saving would need",
                 ["figure", *(f"rps_flow_cnt {n}" for n in budget["rps_flow_cnt"])],
                 budget_rows(budget))
    console.print(
        "The profile's per-event costs (profile "
        f"{budget['profile']}: {stages}; each stage's source in the profile): a packet "
        f"processed away from its reader {_us(budget['profile_packet_ns'])}, an update "
        f"{_us(budget['profile_update_ns'])}. A removed call is an aRFS update or skip "
        "the patch took away (the seed's counters); an away packet one TCP processed on "
        "another CPU than its reader or queued to the owned socket's backlog.",
        highlight=False)
