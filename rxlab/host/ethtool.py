"""The ``ethtool`` command: channels, RSS (indirection table, key, hash function) and
rx-flow-hash fields, JSON output first (``ethtool --json``), its text output where this
ethtool has no JSON for the command (ethtool 6.1 has it for few commands), and a note
where the driver does not support the query (veth: ``-x`` gives EOPNOTSUPP).

Every function runs ``ethtool`` in the current network namespace; callers wrap them in
``rxlab.host.netns.in_netns``. No shell: argument lists only.
"""

from __future__ import annotations

import json
import re

from rxlab.host.netns import have_cmd, run_cmd

FLOW_TYPES = ("tcp4", "udp4", "tcp6", "udp6")
# ethtool -n DEV rx-flow-hash TYPE text lines -> the letters of ethtool -N rx-flow-hash
_FIELD_LETTERS = {
    "L2DA": "m", "VLAN tag": "v", "L3 proto": "t", "IP SA": "s", "IP DA": "d",
    "L4 bytes 0 & 1 [TCP/UDP src port]": "f", "L4 bytes 2 & 3 [TCP/UDP dst port]": "n",
}


class EthtoolError(Exception):
    """A query the driver or this ethtool does not support; str() is the reason."""


def _run(args: list[str]) -> tuple[int, str, str]:
    if not have_cmd("ethtool"):
        raise EthtoolError("ethtool is not installed (apt-get install ethtool)")
    p = run_cmd(["ethtool", *args])
    return p.returncode, p.stdout, p.stderr


# the ethtool command of each query or change -> the ioctl the driver must implement
# (include/uapi/linux/ethtool.h): an EOPNOTSUPP answer names it
_OPS = {"-l": "ETHTOOL_GCHANNELS", "-L": "ETHTOOL_SCHANNELS", "-x": "ETHTOOL_GRSSH",
        "-X": "ETHTOOL_SRSSH", "-n": "ETHTOOL_GRXFH", "-N": "ETHTOOL_SRXFH",
        "-S": "ETHTOOL_GSTATS", "-i": "ETHTOOL_GDRVINFO"}


def _reason(out: str, err: str, args: list[str] | None = None) -> str:
    text = " ".join((err.strip() or out.strip()).split())
    m = re.search(r"(Operation not supported|No such device|Operation not permitted|"
                  r"Invalid argument|Device or resource busy)", text)
    if not m:
        return text[:160] or "failed"
    flag = next((a for a in args or () if a in _OPS), None)
    if m.group(1) == "Operation not supported" and flag:
        return f"Operation not supported: the driver does not support {_OPS[flag]}"
    return m.group(1)


def _json(args: list[str]) -> dict | None:
    """``ethtool --json ARGS`` parsed, or None when this ethtool has no JSON for it."""
    rc, out, err = _run(["--json", *args])
    if rc == 0 and out.strip().startswith("["):
        try:
            data = json.loads(out)
        except ValueError:
            return None
        return data[0] if data and isinstance(data[0], dict) else None
    if "bad command line" in err or "not supported" in err.lower() and "json" in err.lower():
        return None
    if rc != 0:
        raise EthtoolError(_reason(out, err, args))
    return None


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def channels(dev: str) -> dict:
    """{'max': {rx, tx, other, combined}, 'current': {...}, 'source': 'json'|'text'}."""
    data = _json(["-l", dev])
    if data is not None:
        mx = {k: data.get(f"{k}-max") for k in ("rx", "tx", "other", "combined")}
        cur = {k: data.get(k) for k in ("rx", "tx", "other", "combined")}
        return {"max": mx, "current": cur, "source": "json"}
    rc, out, err = _run(["-l", dev])
    if rc != 0:
        raise EthtoolError(_reason(out, err, ["-l", dev]))
    mx: dict = {}
    cur: dict = {}
    target = mx
    for line in out.splitlines():
        if line.startswith("Current hardware settings"):
            target = cur
        m = re.match(r"^(RX|TX|Other|Combined):\s*(\S+)", line)
        if m:
            target[m.group(1).lower()] = _int_or_none(m.group(2))
    if not cur:
        raise EthtoolError("unrecognised ethtool -l output")
    return {"max": mx, "current": cur, "source": "text"}


def rxfh(dev: str) -> dict:
    """RSS: {'rings', 'indirection' (list), 'key' (hex 'aa:bb:..'), 'hfunc', 'source'}."""
    data = _json(["-x", dev])
    if data is not None:
        funcs = data.get("rss-hash-function")
        if isinstance(funcs, dict):
            funcs = next((k for k, v in funcs.items() if v), None)
        return {"rings": data.get("rx-ring-count"),
                "indirection": data.get("rss-indirection-table"),
                "key": data.get("rss-hash-key"), "hfunc": funcs, "source": "json"}
    rc, out, err = _run(["-x", dev])
    if rc != 0:
        raise EthtoolError(_reason(out, err, ["-x", dev]))
    res: dict = {"rings": None, "indirection": None, "key": None, "hfunc": None,
                 "source": "text"}
    lines = out.splitlines()
    section = ""
    table: list[int] = []
    for line in lines:
        m = re.match(r"RX flow hash indirection table for \S+ with (\d+) RX ring", line)
        if m:
            res["rings"] = int(m.group(1))
            section = "table"
            continue
        if line.startswith("RSS hash key"):
            section = "key"
            continue
        if line.startswith("RSS hash function"):
            section = "func"
            continue
        if line.startswith("RSS input transformation"):
            section = "xfrm"
            continue
        if "Operation not supported" in line:
            section = ""
            continue
        if section == "table":
            m = re.match(r"^\s*\d+:\s*(.*)$", line)
            if m:
                table += [int(x) for x in m.group(1).split()]
        elif section == "key" and re.match(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2})+$", line.strip()):
            res["key"] = line.strip().lower()
        elif section == "func":
            m = re.match(r"^\s*(\S+):\s*on\s*$", line)
            if m:
                res["hfunc"] = m.group(1)
    res["indirection"] = table or None
    if res["indirection"] is None and res["key"] is None:
        raise EthtoolError("Operation not supported")
    return res


def flow_hash(dev: str, flow_type: str) -> str:
    """Letters (``sdfn`` ...) the device hashes for ``flow_type``; '' for none."""
    rc, out, err = _run(["-n", dev, "rx-flow-hash", flow_type])
    if rc != 0:
        raise EthtoolError(_reason(out, err, ["-n", dev, "rx-flow-hash", flow_type]))
    letters = ""
    for line in out.splitlines()[1:]:
        line = line.strip()
        if line in _FIELD_LETTERS:
            letters += _FIELD_LETTERS[line]
        elif line == "None":
            return ""
    return letters


def stats(dev: str) -> dict[str, int]:
    """``ethtool -S``: counter name -> value."""
    data = None
    try:
        data = _json(["-S", dev])
    except EthtoolError:
        raise
    if data is not None:
        return {k: int(v) for k, v in data.items() if isinstance(v, int)}
    rc, out, err = _run(["-S", dev])
    if rc != 0:
        raise EthtoolError(_reason(out, err, ["-S", dev]))
    res = {}
    for line in out.splitlines():
        m = re.match(r"^\s+([^:]+):\s*(-?\d+)\s*$", line)
        if m:
            res[m.group(1).strip()] = int(m.group(2))
    return res


def driver(dev: str) -> str | None:
    rc, out, _ = _run(["-i", dev])
    if rc != 0:
        return None
    m = re.search(r"^driver:\s*(\S+)", out, re.M)
    return m.group(1) if m else None


def run_checked(args: list[str]) -> None:
    """Run ``ethtool ARGS`` for a change; EthtoolError with the reason if it fails."""
    rc, out, err = _run(args)
    if rc != 0:
        raise EthtoolError(f"ethtool {' '.join(args)}: {_reason(out, err, args)}")
