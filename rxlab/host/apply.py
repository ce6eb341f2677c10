"""Apply a scenario's steering configuration to a real device, and roll it back.

``plan()`` compares the scenario with what ``rxlab.host.read`` finds and returns the
changes as ``Step``s, after validating every value (device name, CPU numbers against this
host, masks, power-of-two table length, queue counts, what the driver supports), so a bad
configuration fails before anything is written. Each step prints as the exact command a
person would type (``sysctl -w``, ``echo MASK > /sys/...``, ``ethtool -L/-X/-N``; prefixed
with ``ip netns exec NS`` inside a namespace).

``apply()`` first writes every previous value to a rollback file (JSON), then makes the
changes in order (channels, RSS, rx-flow-hash, rps_cpus, rps_flow_cnt, IRQ affinity, IRQ
deferral, sysctls), reading each one back; if a step fails, or SIGINT, SIGTERM or SIGHUP
arrives, every step made so far (the one in progress included) is undone in reverse order,
with further signals ignored until that is done. An undo leaves alone a target that
already holds its previous value (never changed, or restored already), so rolling back
twice is harmless and a read-only file that was never written is no failure. While it
runs, a record under /run/rxlab-host (with a lock that dies with its holder) names the
rollback file: after a SIGKILL, ``pending()`` lets ``host show`` and the next ``host
apply`` on that device say so. ``rollback()`` replays a rollback file's previous values,
after checking every name and value in it. Test hook: ``RXLAB_TEST_PAUSE_AT_STEP``
(``_test_pause``). No shell anywhere: sysfs/procfs are written directly, ethtool gets an
argument list.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rxlab import cpuset
from rxlab.cpuset import parse_cpulist, same_mask
from rxlab.errors import UsageError
from rxlab.host import caps, ethtool
from rxlab.host.netns import check_dev, check_netns, in_initial_netns, in_netns
from rxlab.host.read import SYSCTL_DIR, cpu_count, read_host
from rxlab.host.signals import Interrupted, ignore_signals, interruptible
from rxlab.inputs import read_text
from rxlab.nic import indirection
from rxlab.scenario import Kernel, Rss, Scenario

ROLLBACK_FORMAT = 1
APPLY_SYSCTLS = ("netdev_max_backlog", "netdev_budget", "netdev_budget_usecs", "dev_weight",
                 "flow_limit_cpu_bitmap", "flow_limit_table_len", "rps_sock_flow_entries",
                 "busy_read")
# the kernel rounds both RFS table sizes up to a power of two; it refuses more than 2^29
# socket flow entries, and rxlab keeps per-queue tables to the same bound
RFS_MAX = 1 << 29
INT_MAX = (1 << 31) - 1
ORDER = ("channels", "rxfh", "flow_hash", "rps_cpus", "rps_flow_cnt", "irq", "napi", "sysctl")
# IRQ deferral, per device in sysfs (a write sets every NAPI of the device): the napi
# step's targets and the largest value each takes (napi_defer_hard_irqs_store: S32_MAX;
# gro_flush_timeout: ns, as the scenario bounds it)
NAPI_ATTRS = {"napi_defer_hard_irqs": INT_MAX, "gro_flush_timeout": 10**15}

# matched with fullmatch (``$`` would accept a final newline), ASCII digits only
_HEX = re.compile(r"[0-9a-fA-F]{1,8}(,[0-9a-fA-F]{1,8})*")
_CPULIST = re.compile(r"[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*")
_KEY = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2})*")
_QUEUE = re.compile(r"rx-[0-9]{1,5}")
_SAVED_QUEUE = re.compile(r"[rt]x-[0-9]{1,5}")


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
        if self.kind == "napi":
            return (f"echo {v} > /sys/class/net/{dev}/{self.target}"
                    + (f"  (inside netns {netns})" if netns else ""))
        if self.kind == "channels":
            n = v["count"] if isinstance(v, dict) else v
            return f"{pre}ethtool -L {dev} {self.target} {n}"
        if self.kind == "rxfh":
            return f"{pre}ethtool -X {dev} {' '.join(_rxfh_args(v))}"
        if self.kind == "flow_hash":
            return f"{pre}ethtool -N {dev} rx-flow-hash {self.target} {v}"
        raise ValueError(self.kind)

    @property
    def machine_wide(self) -> bool:
        """A net.core sysctl or an IRQ's affinity: one for the whole machine, whatever
        namespace the device is in."""
        return self.kind in ("sysctl", "irq")

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
    """The mask as rxlab writes it, read the way the kernel's bitmap_parse() reads it
    (``'1,0'`` is CPU 32), so the host gets exactly the CPUs the scenario simulates."""
    try:
        cpus = cpuset.parse_mask(mask)
    except (cpuset.CpuSetError, TypeError) as err:
        raise UsageError(f"{where}: {err}") from None
    if cpus and cpus[-1] >= ncpu:
        raise UsageError(f"{where}: mask {mask!r} names CPU {cpus[-1]} but this host has "
                         f"{ncpu} CPUs")
    return cpuset.normal_mask(mask)


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
    notes = _unapplied_notes(sc, ncpu)
    nq = sc.nic.queues
    # one part after the other, in ORDER: the first bad value found is the one reported
    steps = _channel_steps(nq, dev, d)
    steps += _rxfh_steps(sc.nic.rss, nq, dev, d, notes)
    steps += _flow_hash_steps(sc.nic.rss, dev, d)
    steps += _rps_cpus_steps(sc, nq, ncpu, d)
    steps += _rps_flow_cnt_steps(sc.kernel.rps_flow_cnt, nq, d)
    steps += _irq_steps(sc.nic.irq_affinity, ncpu, dev, d, notes)
    steps += _napi_steps(sc, d, notes)
    steps += _sysctl_steps(sc.kernel, ncpu, info, notes)
    steps.sort(key=lambda s: ORDER.index(s.kind))
    return steps, notes, info


def _unapplied_notes(sc: Scenario, ncpu: int) -> list[str]:
    """What the scenario holds that ``apply`` leaves as it is on this host."""
    notes: list[str] = []
    if sc.host.cpus != ncpu:
        notes.append(f"host.cpus is {sc.host.cpus}, this host has {ncpu} CPUs")
    for what, given in (("nic.ntuple", sc.nic.ntuple), ("nic.rss.contexts", sc.nic.rss.contexts),
                        ("nic.arfs", sc.nic.arfs)):
        if given:
            notes.append(f"{what} is not applied by rxlab (configure it with ethtool -N / "
                         "-X context / -K ntuple on)")
    return notes


def _channel_steps(nq: int, dev: str, d: dict) -> list[Step]:
    """The queue count: ``ethtool -L`` when it differs. The old value keeps each queue's
    settings too: queues the change removes lose theirs, and an undo writes them back."""
    cur_q = d["rx_queues"]
    if nq == cur_q:
        return []
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
    return [Step("channels", kind, saved, nq)]


def _rxfh_steps(rss: Rss, nq: int, dev: str, d: dict, notes: list[str]) -> list[Step]:
    """RSS key and indirection table: one ``ethtool -X`` step, if anything differs."""
    wants_rss = rss.key is not None or rss.indirection != "default"
    dr = d.get("rss") or {}
    if wants_rss and not dr.get("supported"):
        raise UsageError(f"nic.rss: {dev} does not let RSS be configured "
                         f"(ethtool -x: {dr.get('error', 'unsupported')})")
    if not (dr.get("supported") and dr.get("indirection")):
        if rss.table_size != 128 and wants_rss:
            raise UsageError(f"nic.rss: {dev} reports no indirection table")
        return []
    cur_table = [int(x) for x in dr["indirection"]]
    size = len(cur_table)
    if wants_rss and rss.table_size != size:
        raise UsageError(f"nic.rss.table_size: {dev} has a {size}-entry indirection table, "
                         f"the scenario {rss.table_size}")
    new, old = _rxfh_table_change(_table(rss.indirection, size, nq).tolist(), cur_table, nq,
                                  d["rx_queues"], dev)
    if rss.key is not None:
        key = _rxfh_key_change(rss.key, dr, dev)
        if key:
            new["key"], old["key"] = key
    elif dr.get("key"):
        notes.append(f"nic.rss.key not given: {dev} keeps its key (the model assumes the "
                     "Microsoft verification key)")
    return [Step("rxfh", dev, old, new)] if new else []


def _rxfh_table_change(want_table: list[int], cur_table: list[int], nq: int, cur_q: int,
                       dev: str) -> tuple[dict, dict]:
    """(new, old) ``ethtool -X`` forms of the table, both empty when it is unchanged; the
    current table must have a form too, or the change could not be rolled back."""
    if want_table == cur_table:
        return {}, {}
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
    return dict(w), dict(ow)


def _rxfh_key_change(key: str, dr: dict, dev: str) -> tuple[str, str] | None:
    """(new, old) RSS key as ``ethtool -X hkey`` takes it, None when it is unchanged."""
    from rxlab.nic.toeplitz import parse_key
    try:
        k = bytes(parse_key(key))
    except ValueError as err:
        raise UsageError(f"nic.rss.key: {err}") from None
    want_key = ":".join(f"{b:02x}" for b in k)
    cur_key = (dr.get("key") or "").lower()
    if cur_key and len(want_key) != len(cur_key):
        raise UsageError(f"nic.rss.key: {len(k)} bytes, {dev}'s key has "
                         f"{(len(cur_key) + 1) // 3}")
    return None if want_key == cur_key else (want_key, cur_key)


def _flow_hash_steps(rss: Rss, dev: str, d: dict) -> list[Step]:
    """The rx-flow-hash fields of each flow type the scenario gives."""
    if not rss.flow_hash:
        return []
    fh = d.get("flow_hash") or {}
    if not fh.get("supported"):
        raise UsageError(f"nic.rss.flow_hash: {dev} does not support rx-flow-hash "
                         f"({fh.get('error', 'unsupported')})")
    return [Step("flow_hash", t, fh.get(t) or "", letters)
            for t, letters in rss.flow_hash.items() if set(letters) != set(fh.get(t, ""))]


def _rps_cpus_steps(sc: Scenario, nq: int, ncpu: int, d: dict) -> list[Step]:
    """rps_cpus per rx queue (sysfs)."""
    masks = _desired_masks(sc, nq)
    cur = {q["queue"]: q["rps_cpus"] for q in d["rx"]}
    steps = []
    for q, m in enumerate(masks):
        m = _check_mask(m, ncpu, f"kernel.rps_cpus[{q}]")
        old = cur.get(q)
        if old is None or not same_mask(old, m):
            steps.append(Step("rps_cpus", f"rx-{q}", old, m))
    return steps


def _rps_flow_cnt_steps(rfc: int | dict[int, int], nq: int, d: dict) -> list[Step]:
    """rps_flow_cnt per rx queue (RFS; sysfs): a step only where the table the kernel
    keeps changes, since it rounds the size up to a power of two."""
    want_cnt = [rfc] * nq if isinstance(rfc, int) else [0] * nq
    if isinstance(rfc, dict):
        for q, n in rfc.items():
            if not 0 <= q < nq:
                raise UsageError(f"kernel.rps_flow_cnt: queue {q} does not exist "
                                 f"(nic.queues = {nq})")
            want_cnt[q] = n
    cur_cnt = {q["queue"]: q["rps_flow_cnt"] for q in d["rx"]}
    steps = []
    for q, n in enumerate(want_cnt):
        if not 0 <= n <= RFS_MAX:
            raise UsageError(f"kernel.rps_flow_cnt[{q}]: {n} is out of range 0..{RFS_MAX}")
        old = cur_cnt.get(q)
        if old is None or rfs_size(int(old)) != rfs_size(n):
            steps.append(Step("rps_flow_cnt", f"rx-{q}", None if old is None else str(old),
                              str(n)))
    return steps


def _napi_steps(sc: Scenario, d: dict, notes: list[str]) -> list[Step]:
    """IRQ deferral (napi_defer_hard_irqs, gro_flush_timeout) of the device in sysfs. A
    per-queue value is per NAPI over netdev netlink (napi-set, which needs each NAPI's
    id): not applied, and said so."""
    steps = []
    for attr in NAPI_ATTRS:
        want = getattr(sc.nic, attr)
        if isinstance(want, dict):
            notes.append(f"nic.{attr} per queue is not applied by rxlab (set each NAPI with "
                         "ynl --family netdev --do napi-set, 6.13+)")
            continue
        have = d.get(attr)
        if have is None:
            if want:
                raise UsageError(f"nic.{attr}: this kernel has no /sys/class/net/DEV/{attr} "
                                 "(napi_defer_hard_irqs 5.8+, gro_flush_timeout 3.19+); "
                                 "remove it")
            continue
        if int(have) != want:
            steps.append(Step("napi", attr, str(have), str(want)))
    return steps


def _irq_steps(irq_affinity: list[int] | None, ncpu: int, dev: str, d: dict,
               notes: list[str]) -> list[Step]:
    """The affinity of each identified rx queue IRQ; queues without one get a note."""
    if irq_affinity is None:
        return []
    rx_irqs = {i["queue"]: i for i in d.get("irqs", []) if i["kind"] in ("rx", "rxtx")}
    if not rx_irqs:
        notes.append(f"nic.irq_affinity not applied: no queue IRQs identified for {dev}")
    steps = []
    for q, c in enumerate(irq_affinity):
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
    return steps


def _sysctl_steps(k: Kernel, ncpu: int, info: dict, notes: list[str]) -> list[Step]:
    """The global net.core sysctls (initial namespace only); one this host lacks is a
    note, or an error when the scenario uses its feature."""
    tl = k.flow_limit_table_len
    if tl & (tl - 1):
        raise UsageError(f"kernel.flow_limit_table_len: {tl} is not a power of two (the "
                         "kernel returns EINVAL)")
    want = {"netdev_max_backlog": k.netdev_max_backlog, "netdev_budget": k.netdev_budget,
            "netdev_budget_usecs": k.netdev_budget_usecs, "dev_weight": k.dev_weight,
            "flow_limit_cpu_bitmap": _check_mask(k.flow_limit_cpu_bitmap, ncpu,
                                                 "kernel.flow_limit_cpu_bitmap"),
            "flow_limit_table_len": tl,
            "rps_sock_flow_entries": k.rps_sock_flow_entries, "busy_read": k.busy_read}
    if not 0 <= k.rps_sock_flow_entries <= RFS_MAX:
        raise UsageError(f"kernel.rps_sock_flow_entries: {k.rps_sock_flow_entries} is out of "
                         f"range 0..{RFS_MAX}")
    have = info.get("sysctls") or {}
    absent = info.get("sysctls_absent") or {}
    steps = []
    for name, v in want.items():
        if v is None:
            continue
        if name != "flow_limit_cpu_bitmap" and not 0 <= int(v) <= INT_MAX:
            raise UsageError(f"kernel.{name}: {v} is out of range 0..{INT_MAX}")
        h = have.get(name)
        if h is None:
            notes.append(_absent_sysctl(name, v, absent.get(name)))
            continue
        same = _same_sysctl(name, str(h), str(v))
        if not same:
            steps.append(Step("sysctl", name, str(h), str(v)))
    return steps


# what a net.core sysctl holds when its feature is unused: the kernel's defaults
# (net/core/dev.c v6.18: netdev_flow_limit_table_len = 1 << 12; no CPU in the bitmap,
# no socket flow table; no busy poll: sysctl_net_busy_read 0), so a kernel without the
# feature runs as if it held them
UNUSED = {"flow_limit_cpu_bitmap": "0", "flow_limit_table_len": "4096",
          "rps_sock_flow_entries": "0", "busy_read": "0"}


def _absent_sysctl(name: str, value, why: str | None) -> str:
    """A sysctl this host does not have: a note when the scenario leaves its feature
    unused, else one line naming the cause (the kernel option, or the namespace)."""
    why = why or "not readable here"
    unused = name in UNUSED and _same_sysctl(name, UNUSED[name], str(value))
    if unused and caps.probe().initial_netns:
        return f"net.core.{name} not written: {why} (the scenario leaves it unused)"
    if not caps.probe().initial_netns:
        raise UsageError(f"net.core.{name} is not visible: run rxlab in the initial "
                         "network namespace (the global sysctls live only there)")
    raise UsageError(f"kernel.{name}: {value} needs net.core.{name}, and {why}; set "
                     f"kernel.{name}: {UNUSED.get(name, 'its default')} or use a kernel "
                     "that has it")


# ----------------------------------------------------------------------- executing


def rfs_size(n: int) -> int:
    """What the kernel keeps for an RFS table size: 0, or n rounded up to a power of two."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def _same_sysctl(name: str, have: str, want: str) -> bool:
    if name == "flow_limit_cpu_bitmap":
        return same_mask(have, want)
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
            same = same_mask(cur, str(v)) if attr != "rps_flow_cnt" else (
                int(cur) == int(v))
            if not same:
                _write_file(p, str(v))


def _write(step: Step, value: Any, dev: str, netns: str | None) -> None:
    """Write ``value`` to ``step``'s target; raises on failure."""
    if step.kind == "sysctl":
        _write_file(str(SYSCTL_DIR / step.target), str(value))
    elif step.kind in ("rps_cpus", "rps_flow_cnt"):
        in_netns(netns, _write_file, _queue_path(dev, step.target, step.kind), str(value))
    elif step.kind == "irq":
        _write_file(f"/proc/irq/{int(step.target)}/smp_affinity_list", str(value))
    elif step.kind == "napi":
        in_netns(netns, _write_file, f"/sys/class/net/{dev}/{step.target}", str(value))
    elif step.kind == "channels":
        n = value["count"] if isinstance(value, dict) else value
        in_netns(netns, ethtool.run_checked, ["-L", dev, step.target, str(n)])
    elif step.kind == "rxfh":
        in_netns(netns, ethtool.run_checked, ["-X", dev, *_rxfh_args(value)])
    elif step.kind == "flow_hash":
        in_netns(netns, ethtool.run_checked, ["-N", dev, "rx-flow-hash", step.target, value])
    else:
        raise ValueError(f"unknown step kind {step.kind!r}")


def _holds(step: Step, value: Any, dev: str, netns: str | None) -> tuple[bool, Any]:
    """(whether ``step``'s target holds ``value`` as the kernel keeps it, what it holds)."""
    if step.kind == "sysctl":
        got = _read_file(str(SYSCTL_DIR / step.target))
        return _same_sysctl(step.target, got, str(value)), got
    if step.kind == "rps_cpus":
        got = in_netns(netns, _read_file, _queue_path(dev, step.target, "rps_cpus"))
        return same_mask(got, str(value)), got
    if step.kind == "rps_flow_cnt":
        got = in_netns(netns, _read_file, _queue_path(dev, step.target, "rps_flow_cnt"))
        return int(got) == rfs_size(int(value)), got
    if step.kind == "irq":
        got = _read_file(f"/proc/irq/{int(step.target)}/smp_affinity_list")
        return parse_cpulist(got) == parse_cpulist(str(value)), got
    if step.kind == "napi":
        got = in_netns(netns, _read_file, f"/sys/class/net/{dev}/{step.target}")
        return int(got) == int(value), got
    if step.kind == "channels":
        n = value["count"] if isinstance(value, dict) else value
        got = in_netns(netns, ethtool.channels, dev)["current"].get(step.target)
        return got == n, got
    if step.kind == "rxfh":
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
        return ok, got
    if step.kind == "flow_hash":
        got = in_netns(netns, ethtool.flow_hash, dev, step.target)
        return set(got) == set(value), got
    raise ValueError(f"unknown step kind {step.kind!r}")


def _set(step: Step, value: Any, dev: str, netns: str | None) -> None:
    """Make ``step``'s target hold ``value`` and read it back; raises on failure."""
    _write(step, value, dev, netns)
    ok, got = _holds(step, value, dev, netns)
    if ok and step.kind == "channels" and isinstance(value, dict):
        in_netns(netns, _restore_queues, dev, value)  # undo: values lost with the queues
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


def _undo(steps: list[Step], dev: str, netns: str | None, log) -> tuple[int, list[str]]:
    """Set every step back to its old value, last first: (values restored, failures).

    A target that already holds its old value is left alone: it was never changed (a
    write that failed, an apply stopped before it) or is restored already, so a rollback
    can be run again, and a read-only file that was never written is no failure."""
    restored, errors = 0, []
    for s in reversed(steps):
        if s.old is None:  # the target did not exist before (a queue added by -L)
            continue
        try:
            if _holds(s, s.old, dev, netns)[0]:
                continue
        except Exception:  # noqa: BLE001 - cannot read it: write the old value anyway
            pass
        try:
            _set(s, s.old, dev, netns)
            restored += 1
            log(f"restored: {s.command(dev, netns, s.old)}")
        except Exception as err:  # noqa: BLE001 - keep restoring the others
            errors.append(f"{s.command(dev, netns, s.old)}: "
                          f"{getattr(err, 'strerror', None) or err}")
    return restored, errors


def _changes(n: int) -> str:
    return f"{n} change{'' if n == 1 else 's'}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------- signals


TEST_PAUSE_ENV = "RXLAB_TEST_PAUSE_AT_STEP"


def _test_pause(rollback_path: Path, step: int) -> None:
    """Test hook (``RXLAB_TEST_PAUSE_AT_STEP=K``): block before writing step K until a
    signal arrives, with ``ROLLBACK_FILE.paused`` present meanwhile, so a test can
    interrupt ``apply`` at a chosen step. Nothing else reads the variable."""
    marker = Path(f"{rollback_path}.paused")
    marker.write_text(f"{step}\n")
    try:
        while True:
            time.sleep(3600)
    finally:
        marker.unlink(missing_ok=True)


# ----------------------------------------------------------------------- applies in flight

# One record per device while an apply runs (and after it, if it was killed or could not
# roll back completely), with a lock beside it that dies with its holder: ``host show`` and
# the next ``host apply`` on that device find what a SIGKILL left behind. Under /run,
# which is emptied at boot, as the values themselves are.
STATE_DIR = Path("/run/rxlab-host")


def _where(dev: str, netns: str | None) -> str:
    return f"{dev} in netns {netns}" if netns else dev


def _state_paths(dev: str, netns: str | None) -> tuple[Path, Path]:
    h = hashlib.sha256(f"{netns or ''}\0{dev}".encode()).hexdigest()[:16]
    base = STATE_DIR / f"{dev}-{h}"
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".lock")


@contextlib.contextmanager
def _device_lock(dev: str, netns: str | None) -> Iterator[None]:
    """One apply or rollback per device at a time; the kernel drops the lock when its
    holder dies, whatever killed it. The lock file goes with the record."""
    rec, lock = _state_paths(dev, netns)
    while True:
        try:
            STATE_DIR.mkdir(mode=0o755, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise UsageError(f"{STATE_DIR}: cannot record the change of "
                             f"{_where(dev, netns)} ({err.strerror}); run as root") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = (_read_record(rec) or {}).get("pid", "?")
            raise UsageError(f"{_where(dev, netns)}: another `rxlab host apply` or `rollback` "
                             f"is changing it (pid {pid}); wait for it to finish") from None
        try:
            if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                break  # not a file its last holder removed meanwhile
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        if not rec.exists():
            with contextlib.suppress(OSError):
                lock.unlink()  # still held: whoever opened it sees it went, and retries
        os.close(fd)


def _read_record(rec: Path) -> dict | None:
    try:
        doc = json.loads(read_text(rec, "record of an apply", 1 << 16))
    except (UsageError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("rollback_file"), str) else None


def _busy(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def pending(dev: str, netns: str | None) -> str | None:
    """One line when an apply on this device is running now or did not finish (killed
    mid-way: its rollback file still says "applying"; or its rollback could not restore
    everything), naming the command that resolves it; None when there is nothing to say."""
    found = unfinished(dev, netns, locked=False)
    return found[0] if found else None


def unfinished(dev: str, netns: str | None, locked: bool = False) -> tuple[str, bool] | None:
    """(the line, whether it must be resolved before another apply); ``locked``: the
    caller holds the device's lock."""
    rec, lock = _state_paths(dev, netns)
    if not rec.exists():
        return None
    doc = _read_record(rec)
    where = _where(dev, netns)
    if doc is None:
        return (f"{where}: {rec} records an unfinished `rxlab host apply` but cannot be "
                "read; check the values with `rxlab host show`, then delete it"), True
    if not locked and _busy(lock):
        return (f"{where}: an `rxlab host apply` or `rollback` is changing it now "
                f"(pid {doc.get('pid')})"), True
    path = doc["rollback_file"]
    if not Path(path).exists():
        with contextlib.suppress(OSError):
            rec.unlink()  # nothing is left to restore from: said once
        return (f"{where}: an earlier `rxlab host apply` was killed before it finished and "
                f"its rollback file {path} is gone; check the values with `rxlab host show`"
                ), False
    try:
        state = load_rollback(path)[3].get("state")
    except UsageError as err:
        return (f"{where}: an earlier `rxlab host apply` did not finish, and its rollback "
                f"file cannot be used: {err}"), True
    if state == "applying":
        return (f"{where}: an earlier `rxlab host apply` was killed before it finished "
                f"({path} says \"applying\"), so part of it may be in place; undo it with: "
                f"rxlab host rollback {path}"), True
    if state == "rollback-incomplete":
        return (f"{where}: an earlier `rxlab host apply` could not roll back all its "
                f"changes; finish with: rxlab host rollback {path}"), True
    with contextlib.suppress(OSError):
        rec.unlink()  # it finished after all (killed between its last two writes)
    return None


def _record(dev: str, netns: str | None, rollback_path: Path) -> None:
    rec = _state_paths(dev, netns)[0]
    _save(rec, {"device": dev, "netns": netns, "pid": os.getpid(),
                "rollback_file": str(rollback_path.resolve())})


def _forget(dev: str, netns: str | None, rollback_path: Path) -> None:
    """Drop the device's record if it is the one of ``rollback_path``."""
    rec = _state_paths(dev, netns)[0]
    with contextlib.suppress(OSError):
        rec.with_name(rec.name + ".tmp").unlink(missing_ok=True)  # a write cut short
        doc = _read_record(rec)
        if doc and Path(doc["rollback_file"]) == rollback_path.resolve():
            rec.unlink()


# ----------------------------------------------------------------------- apply


def apply(steps: list[Step], dev: str, netns: str | None, rollback_path: Path,
          log=print) -> None:
    """Save previous values to ``rollback_path``, then apply; all-or-nothing.

    A failing step: every change made so far is undone and ``UsageError`` says so.
    SIGINT, SIGTERM or SIGHUP: the same, then ``Interrupted`` with the line to print. SIGKILL
    leaves the rollback file "applying" and the device's record, which ``pending``
    reports."""
    if steps and any(s.kind == "sysctl" for s in steps) and not in_initial_netns():
        raise UsageError("net.core sysctls can only be written from the initial namespace")
    if rollback_path.exists():
        raise UsageError(f"{rollback_path}: rollback file exists; give another --rollback-file")
    try:
        pause_at = int(os.environ.get(TEST_PAUSE_ENV) or 0)
    except ValueError:
        pause_at = 0
    doc = {"rxlab_rollback": ROLLBACK_FORMAT,
           "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "device": dev, "netns": netns, "state": "applying",
           "steps": [asdict(s) for s in steps]}
    n = len(steps)
    with _device_lock(dev, netns):
        found = unfinished(dev, netns, locked=True)
        if found and found[1]:
            raise UsageError(found[0])
        i = -1  # the step in progress: the rollback covers steps[:i + 1]
        with interruptible() as caught:
            try:
                try:
                    _save(rollback_path, doc)
                except OSError as err:
                    raise UsageError(f"{rollback_path}: cannot write the rollback file: "
                                     f"{err.strerror or err}") from None
                _record(dev, netns, rollback_path)
                failed = None
                for i, s in enumerate(steps):
                    if pause_at == i + 1:
                        _test_pause(rollback_path, i + 1)
                    try:
                        _set(s, s.new, dev, netns)
                    except Exception as err:  # noqa: BLE001 - any failure rolls all back
                        failed = err
                        break
                    log(f"applied: {s.command(dev, netns)}")
                    if caught:
                        raise Interrupted(caught[0])
                ignore_signals()  # finishing or undoing now: not to be cut short
                if caught:
                    raise Interrupted(caught[0])
                if failed is None:
                    doc["state"] = "applied"
                    _finish(doc, rollback_path, dev, netns)
                    return
                restored, errors = _undo(steps[:i + 1], dev, netns, log)
                doc["state"] = "rollback-incomplete" if errors else "rolled-back"
                _finish(doc, rollback_path, dev, netns)
                s = steps[i]
                msg = (f"step {i + 1} of {n} failed ({s.command(dev, netns)}: "
                       f"{getattr(failed, 'strerror', None) or failed}); ")
                raise UsageError(_one_line(msg + _outcome(restored, errors, rollback_path)))
            except (Interrupted, KeyboardInterrupt) as intr:
                ignore_signals()
                signum = getattr(intr, "signum", signal.SIGINT)
                at = (f"at step {i + 1} of {n}" if i >= 0 else
                      f"before step 1 of {n}")
                restored, errors = _undo(steps[:i + 1], dev, netns, log)
                if rollback_path.exists():
                    doc["state"] = "rollback-incomplete" if errors else "rolled-back"
                    _finish(doc, rollback_path, dev, netns)
                else:  # stopped while writing it: nothing was changed
                    rollback_path.with_name(rollback_path.name + ".tmp").unlink(missing_ok=True)
                    _forget(dev, netns, rollback_path)
                msg = (f"interrupted ({signal.Signals(signum).name}) {at}; "
                       + _outcome(restored, errors, rollback_path))
                raise Interrupted(signum, _one_line(msg)) from None


def _outcome(restored: int, errors: list[str], rollback_path: Path) -> str:
    if not errors:
        return f"rolled back {_changes(restored)}; the host is as before"
    return (f"rolled back {_changes(restored)}, but ROLLBACK INCOMPLETE: "
            f"{'; '.join(errors)}; finish with: rxlab host rollback {rollback_path}")


def _finish(doc: dict, rollback_path: Path, dev: str, netns: str | None) -> None:
    """Record the final state; the device's record goes unless something is left to do."""
    try:
        _save(rollback_path, doc)
    except OSError:
        return  # the file still says "applying": `pending` keeps pointing at it
    if doc["state"] in ("applied", "rolled-back"):
        _forget(dev, netns, rollback_path)


# ----------------------------------------------------------------------- rollback files

_DIGITS = re.compile(r"[0-9]{1,10}")  # ASCII only: str.isdigit() takes "²", int() does not
_DIGITS_LONG = re.compile(r"[0-9]{1,16}")  # gro_flush_timeout: ns
_STATES = ("applying", "applied", "rolled-back", "rollback-incomplete")
_DOC_KEYS = {"rxlab_rollback", "created", "device", "netns", "state", "steps"}


def _is_int(v: Any, lo: int, hi: int) -> bool:
    return type(v) is int and lo <= v <= hi  # not bool


def _number(v: Any, hi: int) -> bool:
    return isinstance(v, str) and bool(_DIGITS.fullmatch(v)) and int(v) <= hi


def _hexmask(v: Any) -> bool:
    return isinstance(v, str) and bool(_HEX.fullmatch(v.lower().removeprefix("0x")))


def _check_value(kind: str, target: str, v: Any, where: str) -> None:
    bad = UsageError(f"{where}: bad {kind} value {v!r}"[:300])
    if kind == "sysctl":
        if target not in APPLY_SYSCTLS:
            raise UsageError(f"{where}: sysctl {target!r} is not one rxlab changes")
        if not (_hexmask(v) if target == "flow_limit_cpu_bitmap" else _number(v, INT_MAX)):
            raise bad
    elif kind in ("rps_cpus", "rps_flow_cnt"):
        if not _QUEUE.fullmatch(target):
            raise UsageError(f"{where}: bad queue {target!r}")
        ok = _hexmask(v) if kind == "rps_cpus" else _number(v, RFS_MAX)
        if v is not None and not ok:
            raise bad
    elif kind == "napi":
        if target not in NAPI_ATTRS:
            raise UsageError(f"{where}: {target!r} is not a device attribute rxlab changes")
        if not (isinstance(v, str) and _DIGITS_LONG.fullmatch(v)
                and int(v) <= NAPI_ATTRS[target]):
            raise bad
    elif kind == "irq":
        if not _DIGITS.fullmatch(target) or int(target) > INT_MAX:
            raise UsageError(f"{where}: bad IRQ {target!r}")
        if not (isinstance(v, str) and _CPULIST.fullmatch(v)):
            raise bad
    elif kind == "channels":
        if target not in ("rx", "combined"):
            raise UsageError(f"{where}: bad channel kind {target!r}")
        if isinstance(v, dict):
            if set(v) - {"count", "rx", "tx"}:
                raise bad
            saved = [v.get("rx", {}), v.get("tx", {})]
            if not all(isinstance(x, dict) for x in saved):
                raise bad
            for qname, attrs in {**saved[0], **saved[1]}.items():
                if not _SAVED_QUEUE.fullmatch(qname) or not isinstance(attrs, dict):
                    raise bad
                for a, x in attrs.items():  # as read_host gives them: counts are ints
                    ok = _is_int(x, 0, RFS_MAX) or _number(x, RFS_MAX) if (
                        a == "rps_flow_cnt") else a in ("rps_cpus", "xps_cpus") and _hexmask(x)
                    if x is not None and not ok:
                        raise bad
        if not _is_int(v.get("count") if isinstance(v, dict) else v, 1, 4096):
            raise bad
    elif kind == "rxfh":
        if not isinstance(v, dict) or set(v) - {"key", "weights", "equal"}:
            raise bad
        if v.get("equal") is not None and not _is_int(v["equal"], 1, 4096):
            raise bad
        if v.get("key") is not None and not (isinstance(v["key"], str)
                                              and _KEY.fullmatch(v["key"])):
            raise bad
        w = v.get("weights")
        if w is not None and not (isinstance(w, list) and len(w) <= 4096 and all(
                _is_int(x, 0, 65536) for x in w)):
            raise bad
    elif kind == "flow_hash":
        if target not in ethtool.FLOW_TYPES or not isinstance(v, str) or set(v) - set(
                "mvtsdfnr"):
            raise bad
    else:
        raise UsageError(f"{where}: unknown step kind {kind!r}"[:300])


def load_rollback(path: str | Path) -> tuple[list[Step], str, str | None, dict]:
    """A rollback file, checked as ``plan`` checks what it writes: every name (device,
    namespace, sysctl, queue, IRQ) and every value's form; one-line UsageError if not."""
    p = Path(path)
    text = read_text(p, "rollback file")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise UsageError(f"{p}: not a rollback file (nested too deeply)") from None
    except ValueError as err:
        raise UsageError(f"{p}: not a readable rollback file ({err})") from None
    if not isinstance(doc, dict) or doc.get("rxlab_rollback") != ROLLBACK_FORMAT or (
            type(doc.get("rxlab_rollback")) is not int):
        raise UsageError(f"{p}: not an rxlab rollback file (format {ROLLBACK_FORMAT})")
    extra = sorted(str(k) for k in set(doc) - _DOC_KEYS)
    if extra:
        raise UsageError(f"{p}: unknown field {extra[0][:40]!r} in a rollback file")
    if doc.get("state") not in _STATES:
        raise UsageError(f"{p}: state must be one of {', '.join(_STATES)}")
    if not isinstance(doc.get("steps"), list):
        raise UsageError(f"{p}: steps must be a list of steps")
    dev = check_dev(doc.get("device"))
    netns = doc.get("netns")
    check_netns(netns)
    steps = []
    for i, s in enumerate(doc["steps"]):
        where = f"{p}: steps[{i}]"
        if not isinstance(s, dict) or set(s) != {"kind", "target", "old", "new"} or not (
                isinstance(s["kind"], str) and isinstance(s["target"], str)):
            raise UsageError(f"{where}: malformed step (kind, target, old, new)")
        kind, target = s["kind"], s["target"]
        _check_value(kind, target, s["old"], where)
        _check_value(kind, target, s["new"], where)
        steps.append(Step(kind, target, s["old"], s["new"]))
    return steps, dev, netns, doc


def rollback(path: str | Path, log=print) -> tuple[int, int]:
    """Restore the previous values saved in a rollback file: (values restored, steps).
    Steps whose target already holds its previous value are left alone, so a file left
    "applying" by a killed apply, or "rollback-incomplete", can be finished with it."""
    p = Path(path)
    steps, dev, netns, doc = load_rollback(p)
    if doc.get("state") == "rolled-back":
        raise UsageError(f"{p}: already rolled back")
    if any(s.kind == "sysctl" for s in steps) and not in_initial_netns():
        raise UsageError("net.core sysctls can only be written from the initial namespace")
    with _device_lock(dev, netns):
        restored, errors = _undo(steps, dev, netns, log)
        doc["state"] = "rolled-back" if not errors else "rollback-incomplete"
        try:
            _save(p, doc)
        except OSError as err:
            raise UsageError(f"{p}: restored {_changes(restored)} but cannot record it in the "
                             f"file ({err.strerror or err})") from None
        if not errors:
            _forget(dev, netns, p)
    if errors:
        raise UsageError(_one_line(f"rollback incomplete: {'; '.join(errors)}; run "
                                   f"`rxlab host rollback {p}` again once fixed"))
    return restored, len(steps)
