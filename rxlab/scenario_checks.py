"""Cross-field checks of a scenario: every queue and CPU the compiled loop indexes exists.

The fields are valid on their own by now (``rxlab.scenario``); these checks need two
sections at once (a table against ``nic.queues``, a CPU set against ``host.cpus``). The
rules are the kernel's and ethtool's: an indirection entry must name an rx ring
(``ethtool_copy_validate_indir()``, net/ethtool/ioctl.c), a CPU mask may name only
possible CPUs (``bitmap_parse()`` refuses bits past nr_cpumask_bits), and so on. Each
raises ``ValueError`` with the field path and the fix; pydantic reports it as one line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rxlab import cpuset
from rxlab.kernel.hashfn import roundup_pow_of_two
from rxlab.kernel.stages import STAGES
from rxlab.kernel.versions import behaviour
from rxlab.nic import indirection as indir

# Linux releases: the last minor of each major (3.19, 4.20, 5.19, 6.19); 7.x is current.
KERNEL_RELEASES = {3: 19, 4: 20, 5: 19, 6: 19, 7: 1}
SIM_TABLE_LIMIT = 1 << 26  # rps_dev_flow entries over all queues that rxlab allocates

_INDIR_RULE = ("ethtool -X refuses it and the kernel returns -EINVAL for an entry >= "
               "the rx rings: ethtool_copy_validate_indir(), net/ethtool/ioctl.c")


def check_scenario(sc) -> None:
    n, nq = sc.host.cpus, sc.nic.queues
    for k in sc.host.costs:
        if k not in STAGES:
            raise ValueError(f"host.costs.{k}: unknown stage; known: {', '.join(STAGES)}")
    _nic(sc, n, nq)
    _kernel(sc, n, nq)
    for i, app in enumerate(sc.apps):
        _app(sc, i, app, n, nq)
    _afxdp_queues(sc)
    _xdp(sc, n)


def _cpus_exist(cpus: list[int], n: int, where: str) -> None:
    for c in cpus:
        if not 0 <= c < n:
            raise ValueError(f"{where}: CPU {c} does not exist (host.cpus = {n})")


def _whole(v: Any, where: str, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{where}: {v!r} is not a whole number; {what}")
    return int(v)


def table(spec: Any, size: int, nq: int, where: str) -> np.ndarray:
    """The indirection table a spec builds, after checking it names only queues < nq."""
    if spec == "default":
        return indir.default_table(size, nq)
    if isinstance(spec, list):
        for k, q in enumerate(spec):
            if not 0 <= q < nq:
                raise ValueError(f"{where}[{k}]: queue {q} does not exist (nic.queues = "
                                 f"{nq}); use queues 0..{nq - 1} ({_INDIR_RULE})")
        if spec and size % len(spec):
            raise ValueError(f"{where}: {len(spec)} entries do not divide nic.rss.table_size "
                             f"{size}; give {size} entries or a divisor of {size} "
                             "(rss_set_prep_indir, net/ethtool/rss.c)")
        return indir.explicit_table(spec, size, nq)
    if isinstance(spec, dict) and set(spec) == {"equal"}:
        k = _whole(spec["equal"], where, "write {equal: N}, N queues")
        if not 1 <= k <= nq:
            raise ValueError(f"{where}: {{equal: {k}}} spreads over queues 0..{k - 1} but "
                             f"nic.queues = {nq}; use 1 <= N <= {nq} ({_INDIR_RULE})")
        return indir.equal_table(size, k)
    if isinstance(spec, dict) and set(spec) == {"weight"}:
        w = spec["weight"]
        if not isinstance(w, list) or not w:
            raise ValueError(f"{where}: weight needs a list, one weight per queue")
        w = [_whole(x, where, "weights are whole numbers >= 0") for x in w]
        if len(w) > nq:
            raise ValueError(f"{where}: {len(w)} weights for nic.queues = {nq}; give at most "
                             f"one weight per queue ({_INDIR_RULE})")
        if any(x < 0 for x in w) or not any(w):
            raise ValueError(f"{where}: weights must be >= 0 and not all 0 (ethtool: "
                             "\"At least one weight must be non-zero\")")
        if sum(w) > size:
            raise ValueError(f"{where}: total weight {sum(w)} exceeds nic.rss.table_size "
                             f"{size} (ethtool refuses it); use smaller weights")
        return indir.weight_table(size, w)
    raise ValueError(f"{where}: {spec!r} is not a table; use default, {{equal: N}}, "
                     "{weight: [w0, w1, ...]} or a list of queues")


def _driver(sc) -> None:
    """What the driver can have: ethtool refuses a ring or table the driver cannot hold."""
    nic, pre = sc.nic, sc.nic.preset()
    name = pre.name
    if nic.ring_size > pre.ring_max.value:
        raise ValueError(f"nic.ring_size: {nic.ring_size} is more than {name}'s maximum "
                         f"{pre.ring_max.value} (ethtool -G: \"requested ring size exceeds "
                         "maximum\", ethnl_set_rings, net/ethtool/rings.c); use at most "
                         f"{pre.ring_max.value}")
    size = nic.rss.table_size
    if size > pre.table_max.value:
        raise ValueError(f"nic.rss.table_size: {size} entries is more than {name}'s "
                         f"indirection table ({pre.table_max.value}); ethtool -X cannot "
                         "resize it (ethtool_set_rxfh_indir returns -EINVAL for another "
                         f"size, net/ethtool/ioctl.c); use {pre.table_max.value} or less")
    if nic.rss.key is not None and name != "generic":
        from rxlab.nic.toeplitz import parse_key

        got, want = len(parse_key(nic.rss.key)), pre.key_bytes.value
        if want == 0:
            raise ValueError(f"nic.rss.key: {name} hashes without a key (ethtool -X hkey "
                             "returns -EOPNOTSUPP); leave nic.rss.key out")
        if got != want:
            raise ValueError(f"nic.rss.key: {got} bytes, but {name}'s key is {want} bytes "
                             "(ethtool_set_rxfh returns -EINVAL for another length, "
                             f"net/ethtool/ioctl.c); give {want} bytes")
    if nic.arfs is not None and nic.arfs.model not in pre.arfs.value:
        if not pre.arfs.value:
            raise ValueError(f"nic.arfs: {name} has no ndo_rx_flow_steer (no aRFS); remove "
                             "nic.arfs or use a driver with aRFS (ice, mlx5)")
        raise ValueError(f"nic.arfs.model: {nic.arfs.model} is not {name}'s filter model; "
                         f"use {' or '.join(pre.arfs.value)}")


def _nic(sc, n: int, nq: int) -> None:
    nic = sc.nic
    _driver(sc)
    if nic.irq_affinity is not None:
        if len(nic.irq_affinity) != nq:
            raise ValueError(
                f"nic.irq_affinity: {len(nic.irq_affinity)} entries for {nq} queues; give "
                f"one CPU per queue, e.g. '0-{nq - 1}' or [0, 1, ...]")
        for q, c in enumerate(nic.irq_affinity):
            if not 0 <= c < n:
                raise ValueError(f"nic.irq_affinity[{q}]: CPU {c} does not exist "
                                 f"(host.cpus = {n})")
    _threaded(sc, n, nq)
    _backlog_threads(sc)
    _deferral(sc, nq)
    size = nic.rss.table_size
    table(nic.rss.indirection, size, nq, "nic.rss.indirection")
    contexts: dict[int, int] = {}  # id -> the highest queue its table names
    for i, ctx in enumerate(nic.rss.contexts):
        if ctx.id in contexts:
            raise ValueError(f"nic.rss.contexts[{i}].id: context {ctx.id} is defined twice; "
                             "give each context its own id")
        t = table(ctx.indirection, size, nq, f"nic.rss.contexts[{i}].indirection")
        contexts[ctx.id] = int(t.max())
    names = sc.traffic.group_names()
    for r, rule in enumerate(nic.ntuple):
        where = f"nic.ntuple[{r}]"
        _group_exists(rule.match.group, names, f"{where}.match.group")
        if rule.queue is not None and rule.queue >= nq:
            raise ValueError(f"{where}.queue: queue {rule.queue} does not exist "
                             f"(nic.queues = {nq}; ethtool_set_rxnfc returns -EINVAL)")
        if rule.context is not None:
            if rule.context not in contexts:
                known = ", ".join(map(str, contexts)) or "none defined"
                raise ValueError(f"{where}.context: no RSS context {rule.context} in "
                                 f"nic.rss.contexts (ids: {known})")
            top = contexts[rule.context] + rule.ring_cookie
            if top >= nq:
                raise ValueError(f"{where}.ring_cookie: context {rule.context}'s queues + "
                                 f"{rule.ring_cookie} reach queue {top}, but nic.queues = "
                                 f"{nq}; use a smaller offset")


def per_queue(v, nq: int) -> list[int]:
    """A per-queue setting given as one value for all or as {queue: value} (0 elsewhere)."""
    return [v.get(q, 0) for q in range(nq)] if isinstance(v, dict) else [v] * nq


def _deferral(sc, nq: int) -> None:
    """napi_defer_hard_irqs (5.8+) and gro_flush_timeout (3.19+); per queue from 6.13."""
    kb, nic = behaviour(sc.host.kernel), sc.nic
    for key, have, since in (("napi_defer_hard_irqs", kb.napi_defer_hard_irqs,
                              "5.8+, 6f8b12d661d0"),
                             ("gro_flush_timeout", kb.gro_flush_timeout, "3.19+, 3b47d30396ba")):
        v = getattr(nic, key)
        if isinstance(v, dict):
            bad = [q for q in v if not 0 <= q < nq]
            if bad:
                raise ValueError(f"nic.{key}: queue {bad[0]} does not exist (nic.queues = "
                                 f"{nq})")
            if not kb.napi_config_per_queue:
                raise ValueError(f"nic.{key}: Linux {sc.host.kernel} sets it per device only "
                                 "(per NAPI over netdev netlink from 6.13); give one value or "
                                 "set host.kernel to 6.13 or newer")
        if any(per_queue(v, nq)) and not have:
            raise ValueError(f"nic.{key}: Linux {sc.host.kernel} has no {key} ({since}); "
                             "remove it or set a newer host.kernel")
        if any(per_queue(v, nq)) and nic.rx_mode == "netif_rx":
            raise ValueError(f"nic.{key}: rx_mode netif_rx has no NAPI of the device's own to "
                             "defer; use rx_mode napi or remove it")


def _backlog_threads(sc) -> None:
    if sc.kernel.thread_backlog_napi and not behaviour(sc.host.kernel).backlog_threads:
        raise ValueError(f"kernel.thread_backlog_napi: Linux {sc.host.kernel} has no "
                         "threaded backlog NAPI (6.10+, dad6b9770263); remove it or set "
                         "host.kernel to 6.10 or newer")


def _threaded(sc, n: int, nq: int) -> None:
    nic = sc.nic
    if nic.threaded and not behaviour(sc.host.kernel).napi_threaded:
        raise ValueError(f"nic.threaded: Linux {sc.host.kernel} has no threaded NAPI (5.12+, "
                         "/sys/class/net/DEV/threaded); remove it or set host.kernel to 5.12 "
                         "or newer")
    if nic.threaded and nic.rx_mode == "netif_rx":
        raise ValueError("nic.threaded: rx_mode netif_rx has no NAPI of the device's own to "
                         "thread; use rx_mode napi or remove nic.threaded")
    aff = nic.napi_thread_affinity
    if aff is None:
        return
    if not nic.threaded:
        raise ValueError("nic.napi_thread_affinity: the napi/DEV-ID kthreads exist only with "
                         "nic.threaded: true; set it or remove the affinity")
    if len(aff) != nq:
        raise ValueError(f"nic.napi_thread_affinity: {len(aff)} entries for {nq} queues; give "
                         f"one CPU per queue, e.g. '0-{nq - 1}' or [0, 1, ...]")
    for q, c in enumerate(aff):
        if not 0 <= c < n:
            raise ValueError(f"nic.napi_thread_affinity[{q}]: CPU {c} does not exist "
                             f"(host.cpus = {n})")


def _group_exists(name: str | None, names: list[str], where: str) -> None:
    if name is not None and name not in names:
        raise ValueError(f"{where}: no traffic group named {name!r} "
                         f"(groups: {', '.join(names)})")


def _kernel(sc, n: int, nq: int) -> None:
    k = sc.kernel
    masks = k.rps_cpus if isinstance(k.rps_cpus, dict) else (
        {None: k.rps_cpus} if k.rps_cpus is not None else {})
    for q, m in masks.items():
        where = "kernel.rps_cpus" if q is None else f"kernel.rps_cpus.{q}"
        if q is not None and not 0 <= q < nq:
            raise ValueError(f"kernel.rps_cpus: queue {q} does not exist (nic.queues = {nq})")
        _mask_cpus(m, n, where)
    _mask_cpus(k.flow_limit_cpu_bitmap, n, "kernel.flow_limit_cpu_bitmap")
    cnts = k.rps_flow_cnt if isinstance(k.rps_flow_cnt, dict) else {None: k.rps_flow_cnt}
    # store_rps_dev_flow_table_cnt(): the version's maximum (versions.rps_flow_cnt_limit)
    limit = behaviour(sc.host.kernel).rps_flow_cnt_limit
    for q, c in cnts.items():
        where = "kernel.rps_flow_cnt" if q is None else f"kernel.rps_flow_cnt.{q}"
        if q is not None and not 0 <= q < nq:
            raise ValueError(f"kernel.rps_flow_cnt: queue {q} does not exist "
                             f"(nic.queues = {nq})")
        if c > limit:
            raise ValueError(f"{where}: {c} is above the kernel maximum {limit} for "
                             f"host.kernel = {sc.host.kernel}; use a smaller power of two")
    tables = per_queue(k.rps_flow_cnt, nq)
    if sum(roundup_pow_of_two(c) for c in tables if c) > SIM_TABLE_LIMIT:
        raise ValueError(f"kernel.rps_flow_cnt: tables over all queues exceed "
                         f"{SIM_TABLE_LIMIT} entries, more than rxlab allocates; use smaller "
                         "tables")
    if sc.nic.arfs is not None and not (k.rps_sock_flow_entries and any(tables)):
        raise ValueError("nic.arfs: aRFS needs RFS: set kernel.rps_sock_flow_entries and "
                         "kernel.rps_flow_cnt")


def _mask_cpus(mask: str, n: int, where: str) -> None:
    cpus = cpuset.parse_mask(mask)
    if cpus and cpus[-1] >= n:
        bad = next(c for c in cpus if c >= n)
        raise ValueError(f"{where}: mask {mask!r} names CPU {bad} but host.cpus = {n} "
                         "(bitmap_parse refuses bits past the possible CPUs)")


def _app(sc, i: int, app, n: int, nq: int) -> None:
    cpus = app.cpu_list()
    _cpus_exist(cpus, n, f"apps[{i}].cpus")
    if isinstance(app.migrate, list):
        for k, mv in enumerate(app.migrate):
            _cpus_exist([mv.cpu], n, f"apps[{i}].migrate[{k}].cpu")
    elif app.migrate is not None:
        _cpus_exist(cpuset.cpu_set(app.migrate.cpus), n, f"apps[{i}].migrate.cpus")
    if app.afxdp is not None:
        if len(app.afxdp.queues) != len(cpus):
            raise ValueError(
                f"apps[{i}].afxdp.queues: {len(app.afxdp.queues)} queues for "
                f"{len(cpus)} threads; give one rx queue per CPU in apps[{i}].cpus")
        for q in app.afxdp.queues:
            if not 0 <= q < nq:
                raise ValueError(f"apps[{i}].afxdp.queues: queue {q} does not exist "
                                 f"(nic.queues = {nq})")
    if app.groups != "all":
        for g in app.groups:
            _group_exists(g, sc.traffic.group_names(), f"apps[{i}].groups")
    _busy_poll(sc, i, app)


def _busy_poll(sc, i: int, app) -> None:
    """Socket busy polling as modelled from 4.10 (217f69743681), preference and budget
    from 5.11 (7fd3253a7de6); AF_XDP's busy poll (xsk_recvmsg) is not modelled."""
    kb = behaviour(sc.host.kernel)
    usec = sc.kernel.busy_read if app.busy_poll is None else app.busy_poll
    where = f"apps[{i}].busy_poll" if app.busy_poll else "kernel.busy_read"
    if usec and not kb.busy_poll:
        raise ValueError(f"{where}: before 4.10 a busy poll goes through the driver's "
                         "ndo_busy_poll, which rxlab does not model; set host.kernel to "
                         "4.10 or newer or remove it")
    if usec and app.afxdp is not None and app.busy_poll:
        raise ValueError(f"apps[{i}].busy_poll: AF_XDP's busy poll (xsk_recvmsg, "
                         "xsk_sendmsg) is not modelled; remove it")
    for key in ("prefer_busy_poll", "busy_poll_budget"):
        if getattr(app, key) and not kb.prefer_busy_poll:
            raise ValueError(f"apps[{i}].{key}: Linux {sc.host.kernel} has no SO_"
                             f"{key.upper()} (5.11+, 7fd3253a7de6); remove it or set a "
                             "newer host.kernel")


def _afxdp_queues(sc) -> None:
    seen: dict[int, int] = {}
    for i, app in enumerate(sc.apps):
        for q in app.afxdp.queues if app.afxdp else []:
            if q in seen:
                raise ValueError(f"apps[{i}].afxdp.queues: queue {q} already has an AF_XDP "
                                 f"socket (apps[{seen[q]}]); XSKMAP holds one per queue")
            seen[q] = i


def _xdp(sc, n: int) -> None:
    keys: set[int] = set()
    if sc.cpumap is not None:
        keys = set(sc.cpumap.cpu_list())
        for c in sorted(keys):
            if not 0 <= c < n:
                raise ValueError(f"cpumap.cpus: CPU {c} does not exist (host.cpus = {n}); "
                                 "the kernel refuses a key that is not a possible CPU")
    if sc.xdp is None:
        if sc.cpumap is not None:
            raise ValueError("cpumap: entries need an xdp program that redirects to them")
        return
    if sc.nic.rx_mode == "netif_rx":
        raise ValueError("xdp: a device with an XDP program polls with NAPI (veth "
                         "switches to it); set nic.rx_mode: napi")
    names = sc.traffic.group_names()
    for i, rule in enumerate(sc.xdp.rules):
        where = f"xdp.rules[{i}]"
        _group_exists(rule.match.group, names, f"{where}.match.group")
        if rule.action == "redirect-cpu":
            if sc.cpumap is None:
                raise ValueError(f"{where}: redirect-cpu needs a cpumap section")
            _cpus_exist(rule.cpu_list(), n, f"{where}.cpus")
        if rule.action == "redirect-xsk" and not any(a.afxdp for a in sc.apps):
            raise ValueError(f"{where}: redirect-xsk needs an app with an afxdp section "
                             "(the sockets in the XSKMAP)")
        q = rule.match.rx_queue
        if q is not None and q >= sc.nic.queues:
            raise ValueError(f"{where}.match.rx_queue: queue {q} does not exist "
                             f"(nic.queues = {sc.nic.queues})")
        if q is not None and sc.nic.arfs is not None:
            raise ValueError(f"{where}.match.rx_queue: rules on the rx queue with aRFS "
                             "(which moves flows between queues) are not modelled")
