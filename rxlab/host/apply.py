"""Apply a scenario's steering configuration to a real device, and roll it back.

``plan()`` compares the scenario with what ``rxlab.host.read`` finds and returns the
changes as ``Step``s, after validating every value (device name, CPU numbers against this
host, masks, power-of-two table length, queue counts, what the driver supports), so a bad
configuration fails before anything is written. Each step prints as the exact command a
person would type (``sysctl -w``, ``echo MASK > /sys/...``, ``ethtool -L/-X/-N``; prefixed
with ``ip netns exec NS`` inside a namespace).

``apply()`` first writes every previous value to a rollback file (JSON), then makes the
changes in order (channels, RSS, rx-flow-hash, rps_cpus, IRQ affinity, sysctls), reading
each one back; if any step fails, every step made so far (the failing one included) is
undone in reverse order. ``rollback()`` replays a rollback file's previous values.
No shell anywhere: sysfs/procfs are written directly, ethtool gets an argument list.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rxlab.errors import UsageError
from rxlab.host import ethtool
from rxlab.host.netns import check_dev, check_netns, in_initial_netns, in_netns
from rxlab.host.read import SYSCTL_DIR, cpu_count, mask_int, parse_cpulist, read_host
from rxlab.nic import indirection
from rxlab.scenario import Scenario, hex_mask_to_cpus

ROLLBACK_FORMAT = 1
APPLY_SYSCTLS = ("netdev_max_backlog", "netdev_budget", "netdev_budget_usecs", "dev_weight",
                 "flow_limit_cpu_bitmap", "flow_limit_table_len", "rps_sock_flow_entries")
# the kernel rounds both RFS table sizes up to a power of two; it refuses more than 2^29
# socket flow entries, and rxlab keeps per-queue tables to the same bound
RFS_MAX = 1 << 29
INT_MAX = (1 << 31) - 1
ORDER = ("channels", "rxfh", "flow_hash", "rps_cpus", "rps_flow_cnt", "irq", "sysctl")

_HEX = re.compile(r"^[0-9a-fA-F]{1,8}(,[0-9a-fA-F]{1,8})*$")
_CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_KEY = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2})*$")
_QUEUE = re.compile(r"^rx-(\d{1,5})$")


@dataclass
class Step:
    kind: str  # one of ORDER
    target: str  # sysctl name, rx-N, IRQ number, channel kind or flow type
    old: Any
    new: Any

    def command(self, dev: str, netns: str | None, value: Any = None) -> str:
        v = self.new if value is None else value
        pre = f"ip netns exec {netns} " if netns else ""
        if self.kind == "sysctl":
            return f"sysctl -w net.core.{self.target}={v}"
        if self.kind == "rps_cpus":
            return (f"echo {v} > /sys/class/net/{dev}/queues/{self.target}/rps_cpus"
                    + (f"  (inside netns {netns})" if netns else ""))
        if self.kind == "rps_flow_cnt":
            return (f"echo {v} > /sys/class/net/{dev}/queues/{self.target}/rps_flow_cnt"
                    + (f"  (inside netns {netns})" if netns else ""))
        if self.kind == "irq":
            return f"echo {v} > /proc/irq/{self.target}/smp_affinity_list"
        if self.kind == "channels":
            n = v["count"] if isinstance(v, dict) else v
            return f"{pre}ethtool -L {dev} {self.target} {n}"
        if self.kind == "rxfh":
            return f"{pre}ethtool -X {dev} {' '.join(_rxfh_args(v))}"
        if self.kind == "flow_hash":
            return f"{pre}ethtool -N {dev} rx-flow-hash {self.target} {v}"
        raise ValueError(self.kind)

    def shown(self, value: Any) -> str:
        if self.kind == "channels":
            return f"{self.target} {value['count'] if isinstance(value, dict) else value}"
        if self.kind == "rxfh":
            return " ".join(_rxfh_args(value))
        return str(value)


def _rxfh_args(v: dict) -> list[str]:
    args = []
    if v.get("key"):
        args += ["hkey", v["key"]]
    if v.get("equal"):
        args += ["equal", str(v["equal"])]
    if v.get("weights"):
        args += ["weight", *[str(w) for w in v["weights"]]]
    return args


# ----------------------------------------------------------------------- planning


def _rxfh_form(table: list[int] | np.ndarray, nq: int) -> dict | None:
    """``indirection.rxfh_form`` in the plan's words: ``{'equal': N}`` or
    ``{'weights': [...]}``; None if ``ethtool -X`` cannot write the table."""
    form = indirection.rxfh_form(table, nq)
    if form is not None and "weight" in form:
        return {"weights": form["weight"]}
    return form


def _table(spec, size: int, nq: int) -> np.ndarray:
    """The scenario's indirection table, as rxlab.build computes it."""
    try:
        if spec == "default":
            return indirection.default_table(size, nq)
        if isinstance(spec, list):
            return indirection.explicit_table(spec, size, nq)
        if isinstance(spec, dict) and set(spec) == {"equal"}:
            return indirection.equal_table(size, int(spec["equal"]))
        if isinstance(spec, dict) and set(spec) == {"weight"}:
            return indirection.weight_table(size, spec["weight"])
    except (TypeError, ValueError) as err:
        raise UsageError(f"nic.rss.indirection: {err}") from None
    raise UsageError("nic.rss.indirection: use 'default', {equal: N}, {weight: [...]} or a list")


def kernel_mask(value: int) -> str:
    """A CPU mask as the kernel prints and parses it: 32-bit hex groups, commas between."""
    groups = []
    while True:
        groups.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    text = ",".join(f"{g:08x}" for g in reversed(groups))
    return text.lstrip("0") or "0" if len(groups) == 1 else text


def _desired_masks(sc: Scenario, nq: int) -> list[str]:
    rps = sc.kernel.rps_cpus
    masks = ["0"] * nq
    if isinstance(rps, str):
        masks = [rps] * nq
    elif isinstance(rps, dict):
        for q, m in rps.items():
            if not 0 <= q < nq:
                raise UsageError(f"kernel.rps_cpus: queue {q} does not exist "
                                 f"(nic.queues = {nq})")
            masks[q] = m
    return masks


def _check_mask(mask: str, ncpu: int, where: str) -> str:
    if not isinstance(mask, str) or not re.match(r"^(0x)?[0-9a-fA-F,]{1,1100}$", mask.strip()):
        raise UsageError(f"{where}: {mask!r} is not a hex CPU mask such as '3' or '0e'")
    cpus = hex_mask_to_cpus(mask)
    if cpus and cpus[-1] >= ncpu:
        raise UsageError(f"{where}: mask {mask!r} names CPU {cpus[-1]} but this host has "
                         f"{ncpu} CPUs")
    return kernel_mask(mask_int(mask))


def plan(sc: Scenario, dev: str, netns: str | None = None,
         info: dict | None = None) -> tuple[list[Step], list[str], dict]:
    """(steps, notes, host info); UsageError for anything that cannot be applied."""
    check_dev(dev)
    check_netns(netns)
    info = info or read_host(netns, [dev])
    if dev not in info["devices"]:
        raise UsageError(f"no network device {dev!r}" + (f" in netns {netns!r}" if netns else ""))
    d = info["devices"][dev]
    ncpu = cpu_count()
    notes: list[str] = []
    steps: list[Step] = []
    if sc.host.cpus != ncpu:
        notes.append(f"host.cpus is {sc.host.cpus}, this host has {ncpu} CPUs")
    for what, given in (("nic.ntuple", sc.nic.ntuple), ("nic.rss.contexts", sc.nic.rss.contexts),
                        ("nic.arfs", sc.nic.arfs)):
        if given:
            notes.append(f"{what} is not applied by rxlab (configure it with ethtool -N / "
                         "-X context / -K ntuple on)")

    # --- queue count: ethtool -L when it differs
    nq = sc.nic.queues
    cur_q = d["rx_queues"]
    if nq != cur_q:
        ch = d.get("channels") or {}
        if not ch.get("supported"):
            raise UsageError(f"nic.queues: {dev} has {cur_q} rx queues, the scenario {nq}, and "
                             f"its channels cannot be changed ({ch.get('error', 'ethtool -l')})")
        kind = "combined" if ch["current"].get("combined") else "rx"
        mx = ch["max"].get(kind)
        if not ch["current"].get(kind) or mx is None or nq > mx:
            raise UsageError(f"nic.queues: {nq} exceeds the {mx} {kind} channels {dev} "
                             "supports (ethtool -l)")
        saved = {"count": ch["current"][kind],
                 "rx": {f"rx-{q['queue']}": {"rps_cpus": q["rps_cpus"],
                                             "rps_flow_cnt": q["rps_flow_cnt"]}
                        for q in d["rx"]},
                 "tx": {f"tx-{q['queue']}": {"xps_cpus": q["xps_cpus"]} for q in d["tx"]
                        if q.get("xps_cpus") is not None}}
        steps.append(Step("channels", kind, saved, nq))

    # --- RSS: key and indirection table through ethtool -X
    rss = sc.nic.rss
    wants_rss = rss.key is not None or rss.indirection != "default"
    dr = d.get("rss") or {}
    if wants_rss and not dr.get("supported"):
        raise UsageError(f"nic.rss: {dev} does not let RSS be configured "
                         f"(ethtool -x: {dr.get('error', 'unsupported')})")
    if dr.get("supported") and dr.get("indirection"):
        cur_table = [int(x) for x in dr["indirection"]]
        size = len(cur_table)
        if wants_rss and rss.table_size != size:
            raise UsageError(f"nic.rss.table_size: {dev} has a {size}-entry indirection table, "
                             f"the scenario {rss.table_size}")
        want_table = _table(rss.indirection, size, nq).tolist()
        new: dict = {}
        old: dict = {}
        if want_table != cur_table:
            w = _rxfh_form(want_table, nq)
            if w is None:
                raise UsageError("nic.rss.indirection: ethtool -X sets only round-robin tables "
                                 "(equal N) or tables of contiguous runs (weight W0 W1 ...); "
                                 "this one is neither")
            ow = _rxfh_form(cur_table, cur_q)
            if ow is None:
                raise UsageError(f"{dev}'s current indirection table cannot be restored with "
                                 "ethtool -X equal/weight, so rxlab does not change it; set it "
                                 "by hand")
            new.update(w)
            old.update(ow)
        if rss.key is not None:
            from rxlab.nic.toeplitz import parse_key
            try:
                k = bytes(parse_key(rss.key))
            except ValueError as err:
                raise UsageError(f"nic.rss.key: {err}") from None
            want_key = ":".join(f"{b:02x}" for b in k)
            cur_key = (dr.get("key") or "").lower()
            if cur_key and len(want_key) != len(cur_key):
                raise UsageError(f"nic.rss.key: {len(k)} bytes, {dev}'s key has "
                                 f"{(len(cur_key) + 1) // 3}")
            if want_key != cur_key:
                new["key"], old["key"] = want_key, cur_key
        elif dr.get("key"):
            notes.append(f"nic.rss.key not given: {dev} keeps its key (the model assumes the "
                         "Microsoft verification key)")
        if new:
            steps.append(Step("rxfh", dev, old, new))
    elif rss.table_size != 128 and wants_rss:
        raise UsageError(f"nic.rss: {dev} reports no indirection table")

    # --- rx-flow-hash fields
    if rss.flow_hash:
        fh = d.get("flow_hash") or {}
        if not fh.get("supported"):
            raise UsageError(f"nic.rss.flow_hash: {dev} does not support rx-flow-hash "
                             f"({fh.get('error', 'unsupported')})")
        for t, letters in rss.flow_hash.items():
            if set(letters) != set(fh.get(t, "")):
                steps.append(Step("flow_hash", t, fh.get(t) or "", letters))

    # --- rps_cpus per rx queue (sysfs)
    masks = _desired_masks(sc, nq)
    cur = {q["queue"]: q["rps_cpus"] for q in d["rx"]}
    for q, m in enumerate(masks):
        m = _check_mask(m, ncpu, f"kernel.rps_cpus[{q}]")
        old = cur.get(q)
        if old is None or mask_int(old) != mask_int(m):
            steps.append(Step("rps_cpus", f"rx-{q}", old, m))

    # --- rps_flow_cnt per rx queue (RFS; sysfs; the kernel rounds up to a power of two)
    rfc = sc.kernel.rps_flow_cnt
    want_cnt = [rfc] * nq if isinstance(rfc, int) else [0] * nq
    if isinstance(rfc, dict):
        for q, n in rfc.items():
            if not 0 <= q < nq:
                raise UsageError(f"kernel.rps_flow_cnt: queue {q} does not exist "
                                 f"(nic.queues = {nq})")
            want_cnt[q] = n
    cur_cnt = {q["queue"]: q["rps_flow_cnt"] for q in d["rx"]}
    for q, n in enumerate(want_cnt):
        if not 0 <= n <= RFS_MAX:
            raise UsageError(f"kernel.rps_flow_cnt[{q}]: {n} is out of range 0..{RFS_MAX}")
        old = cur_cnt.get(q)
        if old is None or rfs_size(int(old)) != rfs_size(n):
            steps.append(Step("rps_flow_cnt", f"rx-{q}", None if old is None else str(old),
                              str(n)))

    # --- IRQ affinity of identified rx queue IRQs
    if sc.nic.irq_affinity is not None:
        rx_irqs = {i["queue"]: i for i in d.get("irqs", []) if i["kind"] in ("rx", "rxtx")}
        if not rx_irqs:
            notes.append(f"nic.irq_affinity not applied: no queue IRQs identified for {dev}")
        for q, c in enumerate(sc.nic.irq_affinity):
            if c >= ncpu:
                raise UsageError(f"nic.irq_affinity[{q}]: CPU {c} does not exist here "
                                 f"({ncpu} CPUs)")
            i = rx_irqs.get(q)
            if i is None:
                if rx_irqs:
                    notes.append(f"nic.irq_affinity[{q}]: no IRQ identified for rx queue {q}")
                continue
            allowed = parse_cpulist(i["smp_affinity_list"] or "")
            eff = parse_cpulist(i.get("effective_affinity_list") or "")
            if allowed == [c] or (eff == [c] and c in allowed):
                continue  # already handled on CPU c (as rxlab host export reads it)
            steps.append(Step("irq", str(i["irq"]), i["smp_affinity_list"], str(c)))

    # --- global net.core sysctls (initial namespace only)
    k = sc.kernel
    tl = k.flow_limit_table_len
    if tl & (tl - 1):
        raise UsageError(f"kernel.flow_limit_table_len: {tl} is not a power of two (the "
                         "kernel returns EINVAL)")
    want = {"netdev_max_backlog": k.netdev_max_backlog, "netdev_budget": k.netdev_budget,
            "netdev_budget_usecs": k.netdev_budget_usecs, "dev_weight": k.dev_weight,
            "flow_limit_cpu_bitmap": _check_mask(k.flow_limit_cpu_bitmap, ncpu,
                                                 "kernel.flow_limit_cpu_bitmap"),
            "flow_limit_table_len": tl,
            "rps_sock_flow_entries": k.rps_sock_flow_entries}
    if not 0 <= k.rps_sock_flow_entries <= RFS_MAX:
        raise UsageError(f"kernel.rps_sock_flow_entries: {k.rps_sock_flow_entries} is out of "
                         f"range 0..{RFS_MAX}")
    have = info.get("sysctls") or {}
    for name, v in want.items():
        if v is None:
            continue
        if name != "flow_limit_cpu_bitmap" and not 0 <= int(v) <= INT_MAX:
            raise UsageError(f"kernel.{name}: {v} is out of range 0..{INT_MAX}")
        h = have.get(name)
        if h is None:
            raise UsageError(f"net.core.{name} is not visible: run rxlab in the initial "
                             "network namespace (the global sysctls live only there)")
        same = _same_sysctl(name, str(h), str(v))
        if not same:
            steps.append(Step("sysctl", name, str(h), str(v)))
    steps.sort(key=lambda s: ORDER.index(s.kind))
    return steps, notes, info


# ----------------------------------------------------------------------- executing


def rfs_size(n: int) -> int:
    """What the kernel keeps for an RFS table size: 0, or n rounded up to a power of two."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def _same_sysctl(name: str, have: str, want: str) -> bool:
    if name == "flow_limit_cpu_bitmap":
        return mask_int(have) == mask_int(want)
    if name == "rps_sock_flow_entries":
        return int(have) == rfs_size(int(want))
    return int(have) == int(want)


def _write_file(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value + "\n")


def _read_file(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


def _queue_path(dev: str, queue: str, attr: str) -> str:
    return f"/sys/class/net/{dev}/queues/{queue}/{attr}"


def _restore_queues(dev: str, saved: dict) -> None:
    """(in the device's namespace) rewrite saved per-queue values of queues that exist."""
    for qname, attrs in {**saved.get("rx", {}), **saved.get("tx", {})}.items():
        for attr, v in attrs.items():
            p = _queue_path(dev, qname, attr)
            if v is None or not os.path.exists(p):
                continue
            cur = _read_file(p)
            same = mask_int(cur) == mask_int(str(v)) if attr != "rps_flow_cnt" else (
                int(cur) == int(v))
            if not same:
                _write_file(p, str(v))


def _set(step: Step, value: Any, dev: str, netns: str | None) -> None:
    """Make ``step``'s target hold ``value`` and read it back; raises on failure."""
    if step.kind == "sysctl":
        path = str(SYSCTL_DIR / step.target)
        _write_file(path, str(value))
        got = _read_file(path)
        ok = _same_sysctl(step.target, got, str(value))
    elif step.kind == "rps_cpus":
        path = _queue_path(dev, step.target, "rps_cpus")
        in_netns(netns, _write_file, path, str(value))
        got = in_netns(netns, _read_file, path)
        ok = mask_int(got) == mask_int(str(value))
    elif step.kind == "rps_flow_cnt":
        path = _queue_path(dev, step.target, "rps_flow_cnt")
        in_netns(netns, _write_file, path, str(value))
        got = in_netns(netns, _read_file, path)
        ok = int(got) == rfs_size(int(value))
    elif step.kind == "irq":
        path = f"/proc/irq/{int(step.target)}/smp_affinity_list"
        _write_file(path, str(value))
        got = _read_file(path)
        ok = parse_cpulist(got) == parse_cpulist(str(value))
    elif step.kind == "channels":
        n = value["count"] if isinstance(value, dict) else value
        in_netns(netns, ethtool.run_checked, ["-L", dev, step.target, str(n)])
        got = in_netns(netns, ethtool.channels, dev)["current"].get(step.target)
        ok = got == n
        if ok and isinstance(value, dict):  # undo: per-queue values lost with the queues
            in_netns(netns, _restore_queues, dev, value)
    elif step.kind == "rxfh":
        in_netns(netns, ethtool.run_checked, ["-X", dev, *_rxfh_args(value)])
        got = in_netns(netns, ethtool.rxfh, dev)
        ok = True
        if value.get("key"):
            ok = (got.get("key") or "").lower() == value["key"]
        size = len(got.get("indirection") or [])
        if ok and value.get("weights"):
            ok = size > 0 and got["indirection"] == indirection.weight_table(
                size, value["weights"]).tolist()
        if ok and value.get("equal"):
            ok = size > 0 and got["indirection"] == indirection.equal_table(
                size, value["equal"]).tolist()
    elif step.kind == "flow_hash":
        in_netns(netns, ethtool.run_checked, ["-N", dev, "rx-flow-hash", step.target, value])
        ok = set(in_netns(netns, ethtool.flow_hash, dev, step.target)) == set(value)
    else:
        raise ValueError(f"unknown step kind {step.kind!r}")
    if not ok:
        raise OSError(f"read back {got!r} after writing {step.shown(value)}")


def default_rollback_path(dev: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return Path(f"rxlab-rollback-{dev}-{stamp}.json")


def _save(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _undo(steps: list[Step], dev: str, netns: str | None, log) -> list[str]:
    """Set every step back to its old value, last first; returns the failures."""
    errors = []
    for s in reversed(steps):
        if s.old is None:  # the target did not exist before (a queue added by -L)
            continue
        try:
            _set(s, s.old, dev, netns)
            log(f"restored: {s.command(dev, netns, s.old)}")
        except Exception as err:  # noqa: BLE001 - keep restoring the others
            errors.append(f"{s.command(dev, netns, s.old)}: {err}")
    return errors


def apply(steps: list[Step], dev: str, netns: str | None, rollback_path: Path,
          log=print) -> None:
    """Save previous values to ``rollback_path``, then apply; all-or-nothing."""
    if steps and any(s.kind == "sysctl" for s in steps) and not in_initial_netns():
        raise UsageError("net.core sysctls can only be written from the initial namespace")
    if rollback_path.exists():
        raise UsageError(f"{rollback_path}: rollback file exists; give another --rollback-file")
    doc = {"rxlab_rollback": ROLLBACK_FORMAT,
           "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "device": dev, "netns": netns, "state": "applying",
           "steps": [asdict(s) for s in steps]}
    try:
        _save(rollback_path, doc)
    except OSError as err:
        raise UsageError(f"{rollback_path}: cannot write the rollback file: {err}") from None
    done: list[Step] = []
    for i, s in enumerate(steps):
        try:
            done.append(s)  # a failed ethtool call may have changed part of it
            _set(s, s.new, dev, netns)
            log(f"applied: {s.command(dev, netns)}")
        except Exception as err:  # noqa: BLE001 - any failure rolls everything back
            errors = _undo(done, dev, netns, log)
            doc["state"] = "rolled-back" if not errors else "rollback-incomplete"
            _save(rollback_path, doc)
            msg = (f"step {i + 1} of {len(steps)} failed ({s.command(dev, netns)}: "
                   f"{getattr(err, 'strerror', None) or err}); rolled back the {i} change(s) "
                   "before it")
            if errors:
                msg += f"; ROLLBACK INCOMPLETE: {'; '.join(errors)} (see {rollback_path})"
            raise UsageError(msg) from None
    doc["state"] = "applied"
    _save(rollback_path, doc)


# ----------------------------------------------------------------------- rollback files


def _check_value(kind: str, target: str, v: Any, where: str) -> None:
    bad = UsageError(f"{where}: bad {kind} value {v!r}")
    if kind == "sysctl":
        if target not in APPLY_SYSCTLS:
            raise UsageError(f"{where}: sysctl {target!r} is not one rxlab changes")
        if target == "flow_limit_cpu_bitmap":
            if not isinstance(v, str) or not _HEX.match(v.lower().removeprefix("0x")):
                raise bad
        elif not (isinstance(v, str) and v.isdigit() and int(v) <= INT_MAX):
            raise bad
    elif kind == "rps_cpus":
        if not _QUEUE.match(target):
            raise UsageError(f"{where}: bad queue {target!r}")
        if v is not None and not (isinstance(v, str) and _HEX.match(v.lower())):
            raise bad
    elif kind == "rps_flow_cnt":
        if not _QUEUE.match(target):
            raise UsageError(f"{where}: bad queue {target!r}")
        if v is not None and not (isinstance(v, str) and v.isdigit() and int(v) <= RFS_MAX):
            raise bad
    elif kind == "irq":
        if not target.isdigit():
            raise UsageError(f"{where}: bad IRQ {target!r}")
        if not (isinstance(v, str) and _CPULIST.match(v)):
            raise bad
    elif kind == "channels":
        if target not in ("rx", "combined"):
            raise UsageError(f"{where}: bad channel kind {target!r}")
        n = v["count"] if isinstance(v, dict) else v
        if not isinstance(n, int) or not 1 <= n <= 4096:
            raise bad
        if isinstance(v, dict):
            for qname, attrs in {**v.get("rx", {}), **v.get("tx", {})}.items():
                if not re.match(r"^[rt]x-\d{1,5}$", qname) or not isinstance(attrs, dict):
                    raise bad
                for a, x in attrs.items():
                    if a not in ("rps_cpus", "rps_flow_cnt", "xps_cpus"):
                        raise bad
                    if x is not None and not re.match(r"^[0-9a-fA-F,]{1,64}$", str(x)):
                        raise bad
    elif kind == "rxfh":
        if not isinstance(v, dict) or set(v) - {"key", "weights", "equal"}:
            raise bad
        if v.get("equal") is not None and not (isinstance(v["equal"], int)
                                                and 1 <= v["equal"] <= 4096):
            raise bad
        if v.get("key") is not None and not _KEY.match(v["key"]):
            raise bad
        w = v.get("weights")
        if w is not None and not (isinstance(w, list) and all(
                isinstance(x, int) and 0 <= x <= 65536 for x in w)):
            raise bad
    elif kind == "flow_hash":
        if target not in ethtool.FLOW_TYPES or not isinstance(v, str) or set(v) - set(
                "mvtsdfnr"):
            raise bad
    else:
        raise UsageError(f"{where}: unknown step kind {kind!r}")


def load_rollback(path: str | Path) -> tuple[list[Step], str, str | None, dict]:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise UsageError(f"{p}: no such rollback file") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{p}: not a readable rollback file ({err})") from None
    if not isinstance(doc, dict) or doc.get("rxlab_rollback") != ROLLBACK_FORMAT:
        raise UsageError(f"{p}: not an rxlab rollback file (format {ROLLBACK_FORMAT})")
    dev = check_dev(doc.get("device"))
    netns = doc.get("netns")
    check_netns(netns)
    steps = []
    for i, s in enumerate(doc.get("steps") or []):
        where = f"{p}: steps[{i}]"
        if not isinstance(s, dict) or set(s) != {"kind", "target", "old", "new"}:
            raise UsageError(f"{where}: malformed step")
        kind, target = s["kind"], str(s["target"])
        _check_value(kind, target, s["old"], where)
        _check_value(kind, target, s["new"], where)
        steps.append(Step(kind, target, s["old"], s["new"]))
    return steps, dev, netns, doc


def rollback(path: str | Path, log=print) -> int:
    """Restore the previous values saved in a rollback file; returns steps restored."""
    p = Path(path)
    steps, dev, netns, doc = load_rollback(p)
    if doc.get("state") == "rolled-back":
        raise UsageError(f"{p}: already rolled back")
    if any(s.kind == "sysctl" for s in steps) and not in_initial_netns():
        raise UsageError("net.core sysctls can only be written from the initial namespace")
    errors = _undo(steps, dev, netns, log)
    doc["state"] = "rolled-back" if not errors else "rollback-incomplete"
    _save(p, doc)
    if errors:
        raise UsageError(f"rollback incomplete: {'; '.join(errors)}")
    return len(steps)
