"""A saved ``result.json`` read strictly: a regular file of bounded size, JSON of bounded
depth without NaN (``rxlab.inputs.read_json``), and every field an explanation reads
present with its type, with indices that point inside the lists they index. Anything
else is one ``UsageError`` line naming the file and the field, before an explanation
touches it."""

from __future__ import annotations

import json
import math

from rxlab.errors import UsageError
from rxlab.inputs import read_json

MAX_RESULT_BYTES = 64 << 20  # a 4,096-CPU result is ~3 MB
FIX = "give the result.json of `rxlab run --out DIR`"

# the shapes explain reads: a dict lists required keys (others may be present), a list
# [shape] every item, ("map", shape) any keys; the leaves are the checks below
COUNT, SHARE, NUM, OPT_NUM, STR, OPT_STR, OPT_INT = (
    "count", "share", "number", "number or null", "text", "text or null",
    "integer or null")
LATENCY = {"samples": COUNT, "p50": OPT_NUM, "p99": OPT_NUM, "p999": OPT_NUM,
           "mean": OPT_NUM}
SHAPE = {
    "packets": {"offered": COUNT, "delivered": COUNT, "dropped": COUNT,
                "dropped_by_reason": ("map", COUNT)},
    "cpus": [{"cpu": COUNT,
              "util": {k: SHARE for k in ("softirq", "ksoftirqd", "irq", "system", "user",
                                          "idle")},
              "softnet_stat": {k: COUNT for k in ("processed", "dropped", "time_squeeze",
                                                  "flow_limit_count")}}],
    "queues": [{"queue": COUNT, "irq_cpu": COUNT, "packets": COUNT,
                "ring_full_drops": COUNT}],
    "apps": [{"app": STR, "cpu": COUNT, "served": COUNT, "socket_drops": COUNT}],
    "config": {"threads": [{"app": STR, "cpu": COUNT}]},
    "latency_ns": {"to_socket": LATENCY, "to_app": LATENCY},
}
OPTIONAL = {"kernel": OPT_STR, "duration_s": NUM, "seed": COUNT}
CONFIG_OPTIONAL = {k: OPT_INT for k in ("flow_limit_table_len", "flow_limit_history",
                                        "netdev_budget_usecs", "budget_jiffies", "hz")}


def read_result(path) -> dict:
    """The saved result at ``path``, checked; else a one-line UsageError."""
    # a FIFO or a device is refused, and NaN, and nesting past MAX_JSON_DEPTH
    data = read_json(path, "result.json", MAX_RESULT_BYTES, FIX)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not an rxlab result (a JSON {_kind(data)}, not an "
                         f"object); {FIX}")
    missing = [k for k in SHAPE if k not in data]
    if missing:
        raise UsageError(f"{path}: not an rxlab result (no {', '.join(missing)}); {FIX}")
    for key, shape in SHAPE.items():
        _check(path, key, data[key], shape)
    for key, leaf in OPTIONAL.items():
        if key in data:
            _check(path, key, data[key], leaf)
    for key, leaf in CONFIG_OPTIONAL.items():
        if key in data["config"]:
            _check(path, f"config.{key}", data["config"][key], leaf)
    _indices(path, data)
    return data


def _kind(v) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string",
            list: "array", dict: "object"}.get(type(v), type(v).__name__)


def _bad(path, where: str, v, want: str):
    shown = json.dumps(v)[:40] if not isinstance(v, dict | list) else _kind(v)
    raise UsageError(f"{path}: {where}: {shown} where the result has {want}; {FIX}")


def _check(path, where: str, v, shape) -> None:
    if isinstance(shape, dict):
        if not isinstance(v, dict):
            _bad(path, where, v, "an object")
        for k, sub in shape.items():
            if k not in v:
                raise UsageError(f"{path}: {where}: no '{k}'; {FIX}")
            _check(path, f"{where}.{k}", v[k], sub)
    elif isinstance(shape, list):
        if not isinstance(v, list):
            _bad(path, where, v, "an array")
        for i, item in enumerate(v):
            _check(path, f"{where}[{i}]", item, shape[0])
    elif isinstance(shape, tuple):  # ("map", leaf)
        if not isinstance(v, dict):
            _bad(path, where, v, "an object")
        for k, item in v.items():
            _check(path, f"{where}.{k}", item, shape[1])
    elif not _leaf_ok(v, shape):
        _bad(path, where, v, _WANT[shape])


_WANT = {COUNT: "a count (an integer >= 0)", SHARE: "a share (a number in [0, 1])",
         NUM: "a number", OPT_NUM: "a number or null", STR: "text",
         OPT_STR: "text or null", OPT_INT: "an integer or null"}


def _leaf_ok(v, leaf: str) -> bool:
    is_int = isinstance(v, int) and not isinstance(v, bool)
    is_num = (is_int or isinstance(v, float)) and math.isfinite(v)
    if leaf == COUNT:
        return is_int and v >= 0
    if leaf == SHARE:
        return is_num and 0 <= v <= 1
    if leaf == NUM:
        return is_num
    if leaf == OPT_NUM:
        return v is None or is_num
    if leaf == STR:
        return isinstance(v, str)
    if leaf == OPT_STR:
        return v is None or isinstance(v, str)
    return v is None or is_int  # OPT_INT


def _indices(path, data: dict) -> None:
    """CPU and queue numbers are positions in their lists, and every CPU named exists."""
    ncpu = len(data["cpus"])
    for name, key in (("cpus", "cpu"), ("queues", "queue")):
        for i, row in enumerate(data[name]):
            if row[key] != i:
                raise UsageError(f"{path}: {name}[{i}].{key} is {row[key]}, not {i}: the "
                                 f"list is out of order or cut; {FIX}")
    refs = [(f"queues[{i}].irq_cpu", q["irq_cpu"]) for i, q in enumerate(data["queues"])]
    refs += [(f"apps[{i}].cpu", a["cpu"]) for i, a in enumerate(data["apps"])]
    refs += [(f"config.threads[{i}].cpu", t["cpu"])
             for i, t in enumerate(data["config"]["threads"])]
    for where, c in refs:
        if c >= ncpu:
            raise UsageError(f"{path}: {where}: CPU {c} is not in cpus (0..{ncpu - 1}); "
                             f"{FIX}")
    if len(data["apps"]) != len(data["config"]["threads"]):
        raise UsageError(f"{path}: apps has {len(data['apps'])} threads but config.threads "
                         f"{len(data['config']['threads'])}; {FIX}")
    _rps(path, data)


def _rps(path, data: dict) -> None:
    from rxlab.cpuset import parse_mask

    masks = data["config"].get("rps_cpus")
    if masks is None:
        return
    nq = len(data["queues"])
    if not isinstance(masks, list) or len(masks) != nq:
        _bad(path, "config.rps_cpus", masks, f"a list of {nq} masks (one per queue) or null")
    for i, m in enumerate(masks):
        if m is None or m == "":
            continue
        try:
            ok = isinstance(m, str) and len(m) <= 1200 and parse_mask(m) is not None
        except ValueError:  # CpuSetError
            ok = False
        if not ok:
            _bad(path, f"config.rps_cpus[{i}]", m, "a CPU mask such as 'f'")
