"""Scenario files: the YAML schema (pydantic) and loading with one-line errors.

A scenario describes a host (CPUs, kernel version, cost profile), its NIC (queues, RSS,
IRQ affinity), the kernel's steering knobs, the offered traffic and the applications.
Values the kernel would round (powers of two) are rounded the kernel's way when the
scenario is compiled (see ``rxlab.build``) and reported in the result's ``config``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rxlab.errors import UsageError
from rxlab.traffic.spec import TrafficSpec

HEX_RE = re.compile(r"^(0x)?[0-9a-fA-F,]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _cpu_list(text: str | int | list[int]) -> list[int]:
    """'0-3,6' | 5 | [0, 2] -> sorted CPU list (a cpulist, as in /sys cpu lists)."""
    if isinstance(text, int):
        return [text]
    if isinstance(text, list):
        return sorted(set(int(c) for c in text))
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return sorted(out)


def hex_mask_to_cpus(mask: str) -> list[int]:
    """A sysfs CPU bitmap ('ff', '00000001,00000000') -> list of CPU numbers."""
    digits = mask.lower().removeprefix("0x").replace(",", "")
    value = int(digits, 16) if digits else 0
    return [i for i in range(value.bit_length()) if value >> i & 1]


class Jitter(_Strict):
    dist: Literal["deterministic", "exponential", "lognormal"] = "deterministic"
    cv: float = Field(0.5, gt=0, description="coefficient of variation for lognormal")


class Host(_Strict):
    cpus: int = Field(4, ge=1, le=4096)
    kernel: str = "6.19"
    hz: Literal[100, 250, 300, 1000] = 1000
    cost_profile: str = "modern-x86"
    costs: dict[str, float] = Field(default_factory=dict, description="per-stage overrides, ns")
    cost_jitter: Jitter = Field(default_factory=Jitter)

    @field_validator("costs")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        for k, ns in v.items():
            if ns < 0:
                raise ValueError(f"cost {k!r} is negative; costs are ns >= 0")
        return v


class NtupleMatch(_Strict):
    proto: Literal["tcp", "udp"] | None = None
    src_port: int | None = Field(None, ge=0, le=65535)
    dst_port: int | None = Field(None, ge=0, le=65535)
    group: str | None = None


class NtupleRule(_Strict):
    """`ethtool -N DEV flow-type ... action Q | context C`: steer matching flows."""

    match: NtupleMatch
    queue: int | None = Field(None, ge=0)
    context: int | None = Field(None, ge=1)
    ring_cookie: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _one_action(self):
        if (self.queue is None) == (self.context is None):
            raise ValueError("give exactly one of queue or context")
        return self


Indirection = Literal["default"] | dict[str, Any] | list[int]


class RssContext(_Strict):
    id: int = Field(ge=1)
    indirection: Indirection = "default"


class Rss(_Strict):
    hfunc: Literal["toeplitz"] = "toeplitz"
    key: str | None = None  # hex; default: Microsoft verification key
    input_xfrm: Literal["none", "sym-xor", "sym-or-xor"] = "none"
    table_size: int = Field(128, ge=1, le=65536)
    indirection: Indirection = "default"
    flow_hash: dict[Literal["tcp4", "udp4", "tcp6", "udp6"], str] = Field(default_factory=dict)
    contexts: list[RssContext] = Field(default_factory=list)

    @field_validator("flow_hash")
    @classmethod
    def _letters(cls, v: dict[str, str]) -> dict[str, str]:
        for k, s in v.items():
            if not s or set(s) - set("sdfn"):
                raise ValueError(
                    f"{k}: {s!r} uses letters other than s,d,f,n (ethtool rx-flow-hash)"
                )
        return v


class Arfs(_Strict):
    """Accelerated RFS: the driver's ndo_rx_flow_steer and its filter table."""

    model: Literal["ice-hash-match", "ice-tuple-match", "mlx5"]
    capacity: int = Field(8192, ge=1, le=1 << 22, description="hardware n-tuple filters")
    delay_us: float = Field(50.0, ge=0, description="steer request -> filter written")
    period_s: float = Field(1.0, gt=0, description="ice service timer (expiry scan)")


class Nic(_Strict):
    driver: str = "generic"
    queues: int = Field(4, ge=1, le=4096)
    ring_size: int = Field(1024, ge=1, le=65536)
    link_gbps: float = Field(10.0, gt=0)
    max_pps: float | None = Field(None, gt=0, description="NIC packet-rate ceiling")
    nic_fifo: int = Field(512, ge=0, description="packets the NIC buffers above max_pps")
    irq_affinity: list[int] | None = None
    napi_weight: int = Field(64, ge=1, le=65536)
    rx_mode: Literal["napi", "netif_rx"] = Field(
        "napi", description="napi: descriptor ring + NAPI poll; netif_rx: veth/tun/legacy"
    )
    rx_usecs: float = Field(0.0, ge=0, description="interrupt moderation delay")
    rxhash: bool = True
    rss: Rss = Field(default_factory=Rss)
    ntuple: list[NtupleRule] = Field(default_factory=list)
    arfs: Arfs | None = None


class Kernel(_Strict):
    rps_cpus: dict[int, str] | str | None = None  # per-queue hex masks, or one for all
    netdev_max_backlog: int = Field(1000, ge=0)
    netdev_budget: int = Field(300, ge=1)
    netdev_budget_usecs: int | None = Field(None, ge=1)
    dev_weight: int = Field(64, ge=1)
    flow_limit_cpu_bitmap: str = "0"
    flow_limit_table_len: int = Field(4096, ge=2, le=1 << 20)
    flow_limit_variant: Literal["current", "2013"] = "current"
    hashrnd: str | None = None  # 32 hex chars: the boot-random flow-dissector key
    rps_sock_flow_entries: int = Field(0, ge=0)
    rps_flow_cnt: int | dict[int, int] = Field(0, description="per rx queue, or one for all")

    @field_validator("rps_flow_cnt")
    @classmethod
    def _flow_cnt(cls, v):
        for n in v.values() if isinstance(v, dict) else [v]:
            if n < 0:
                raise ValueError(f"{n} is negative; use 0 (off) or a table size")
        return v

    @field_validator("flow_limit_cpu_bitmap")
    @classmethod
    def _hexmask(cls, v: str) -> str:
        if not HEX_RE.match(v):
            raise ValueError(f"{v!r} is not a hex CPU bitmap such as 'f' or '00000001'")
        return v

    @field_validator("rps_cpus")
    @classmethod
    def _rps_masks(cls, v):
        masks = v.values() if isinstance(v, dict) else [v] if isinstance(v, str) else []
        for m in masks:
            if not HEX_RE.match(str(m)):
                raise ValueError(f"{m!r} is not a hex CPU bitmap such as 'f' or '0e'")
        return v


XDP_ACTIONS = ("pass", "drop", "tx", "aborted", "redirect-cpu", "redirect-xsk")


class XdpMatch(NtupleMatch):
    rx_queue: int | None = Field(None, ge=0, description="the xdp_md rx_queue_index")


class XdpRule(_Strict):
    """One branch of the XDP program: flows that match get this verdict."""

    match: XdpMatch = Field(default_factory=XdpMatch)
    action: Literal["pass", "drop", "tx", "aborted", "redirect-cpu", "redirect-xsk"] = Field(
        description="redirect-xsk: to the AF_XDP socket in XSKMAP[rx_queue_index]")
    cpus: str | int | list[int] | None = Field(None, description="redirect-cpu: cpumap keys")
    select: Literal["round-robin", "flow-hash", "rss-hash"] = Field(
        "round-robin",
        description="key per packet in turn, by a hash the program computes over the "
        "5-tuple, or by the RX hash read with bpf_xdp_metadata_rx_hash")

    @model_validator(mode="after")
    def _keys(self):
        if self.action == "redirect-cpu" and self.cpus is None:
            raise ValueError("redirect-cpu needs cpus: the cpumap keys to redirect to")
        if self.action != "redirect-cpu" and self.cpus is not None:
            raise ValueError(f"cpus is only for redirect-cpu, not {self.action!r}")
        return self

    def cpu_list(self) -> list[int]:
        return _cpu_list(self.cpus) if self.cpus is not None else []


class Xdp(_Strict):
    """A native XDP program on every rx queue of the device (reference sec. 9)."""

    rules: list[XdpRule] = Field(default_factory=list, description="first match wins")
    default: Literal["pass", "drop", "tx", "aborted"] = "pass"
    hash_metadata: bool = Field(
        False, description="store the RX hash as frame metadata; the cpumap skb gets it")


class Cpumap(_Strict):
    """BPF_MAP_TYPE_CPUMAP entries: key = destination CPU, value = ptr_ring qsize."""

    cpus: str | int | list[int]
    qsize: int = Field(192, ge=1, le=16384, description="> 16384 is -EOVERFLOW")
    gro: Literal["auto"] | bool = Field("auto", description="auto: on from v6.15")

    def cpu_list(self) -> list[int]:
        return _cpu_list(self.cpus)


def _pow2_ring(v: int) -> int:
    if v < 1 or v & (v - 1):
        raise ValueError(f"{v} is not a power of two (xsk_init_queue returns -EINVAL); "
                         "use e.g. 2048")
    return v


class AfXdp(_Strict):
    """The application reads AF_XDP sockets, one per rx queue listed (one per thread)."""

    queues: list[int] = Field(description="rx queue each thread's socket is bound to")
    rx_ring: int = Field(2048, le=1 << 31)
    fill_ring: int = Field(2048, le=1 << 31)
    umem_frames: int = Field(4096, ge=1, le=1 << 24)
    mode: Literal["copy", "zero-copy"] = "zero-copy"

    @field_validator("rx_ring", "fill_ring")
    @classmethod
    def _rings(cls, v: int) -> int:
        return _pow2_ring(v)


class AppCost(_Strict):
    user_ns: float = Field(0.0, ge=0, description="application work per request (user time)")
    syscall_ns: float | None = Field(None, ge=0, description="recvmsg cost; default: profile")


class Move(_Strict):
    at: float = Field(ge=0, description="seconds")
    cpu: int = Field(ge=0)


class Migrate(_Strict):
    every_s: float = Field(gt=0, description="a random move this often")
    cpus: str | int | list[int] = Field(description="CPUs a random move may pick")


class App(_Strict):
    name: str = "app"
    cpus: Annotated[str | int | list[int], Field(description="one thread per CPU listed")] = 0
    groups: list[str] | Literal["all"] = "all"
    cost: AppCost = Field(default_factory=AppCost)
    rcvbuf: int = Field(212992, ge=1024, description="SO_RCVBUF bytes (rmem_default)")
    batch: int = Field(8, ge=1, le=1024, description="packets a thread reads per wake-up")
    connected: bool = Field(True, description="TCP or connected UDP: recvmsg records RFS")
    migrate: Migrate | list[Move] | None = None
    spread: Literal["hash", "round_robin"] = Field(
        "hash", description="flows to threads: SO_REUSEPORT hash, or one by one in turn"
    )
    afxdp: AfXdp | None = Field(None, description="read AF_XDP sockets instead of UDP/TCP")

    def cpu_list(self) -> list[int]:
        return _cpu_list(self.cpus)


class Metrics(_Strict):
    interval: float = Field(0.01, gt=0, description="time-series interval, seconds")
    warmup: float = Field(0.0, ge=0, description="good/bad queue counts start after this")


class Scenario(_Strict):
    name: str = "scenario"
    description: str = ""
    seed: int = Field(1, ge=0)
    duration: float = Field(0.1, gt=0, le=1e6)
    drain: float = Field(0.05, ge=0, description="seconds simulated after traffic stops")
    host: Host = Field(default_factory=Host)
    nic: Nic = Field(default_factory=Nic)
    kernel: Kernel = Field(default_factory=Kernel)
    traffic: TrafficSpec
    apps: list[App] = Field(default_factory=list)
    xdp: Xdp | None = None
    cpumap: Cpumap | None = None
    metrics: Metrics = Field(default_factory=Metrics)

    @model_validator(mode="after")
    def _cross_checks(self):
        n = self.host.cpus
        if self.nic.irq_affinity is not None:
            if len(self.nic.irq_affinity) != self.nic.queues:
                raise ValueError(
                    f"nic.irq_affinity: {len(self.nic.irq_affinity)} entries for "
                    f"{self.nic.queues} queues; give one CPU per queue"
                )
            for q, c in enumerate(self.nic.irq_affinity):
                if not 0 <= c < n:
                    raise ValueError(
                        f"nic.irq_affinity[{q}]: CPU {c} does not exist (host.cpus = {n})"
                    )
        for i, app in enumerate(self.apps):
            try:
                cpus = app.cpu_list()
            except ValueError:
                raise ValueError(
                    f"apps[{i}].cpus: {app.cpus!r} is not a CPU list like '2-7'"
                ) from None
            for c in cpus:
                if not 0 <= c < n:
                    raise ValueError(f"apps[{i}].cpus: CPU {c} does not exist (host.cpus = {n})")
            moves = app.migrate if isinstance(app.migrate, list) else []
            for k, mv in enumerate(moves):
                if mv.cpu >= n:
                    raise ValueError(
                        f"apps[{i}].migrate[{k}].cpu: CPU {mv.cpu} does not exist (host.cpus = {n})"
                    )
            if isinstance(app.migrate, Migrate):
                for c in _cpu_list(app.migrate.cpus):
                    if not 0 <= c < n:
                        raise ValueError(
                            f"apps[{i}].migrate.cpus: CPU {c} does not exist (host.cpus = {n})"
                        )
            if app.afxdp is not None:
                if len(app.afxdp.queues) != len(cpus):
                    raise ValueError(
                        f"apps[{i}].afxdp.queues: {len(app.afxdp.queues)} queues for "
                        f"{len(cpus)} threads; give one rx queue per CPU in apps[{i}].cpus")
                for q in app.afxdp.queues:
                    if not 0 <= q < self.nic.queues:
                        raise ValueError(f"apps[{i}].afxdp.queues: queue {q} does not exist "
                                         f"(nic.queues = {self.nic.queues})")
            names = set(self.traffic.group_names())
            if app.groups != "all":
                for g in app.groups:
                    if g not in names:
                        raise ValueError(
                            f"apps[{i}].groups: no traffic group named {g!r} "
                            f"(groups: {', '.join(sorted(names))})"
                        )
        self._xdp_checks(n)
        for r, rule in enumerate(self.nic.ntuple):
            if rule.queue is not None and rule.queue >= self.nic.queues:
                raise ValueError(f"nic.ntuple[{r}].queue: queue {rule.queue} does not exist")
        return self


    def _xdp_checks(self, n: int) -> None:
        keys: set[int] = set()
        if self.cpumap is not None:
            try:
                keys = set(self.cpumap.cpu_list())
            except ValueError:
                raise ValueError(
                    f"cpumap.cpus: {self.cpumap.cpus!r} is not a CPU list like '1-6'") from None
            for c in sorted(keys):
                if not 0 <= c < n:
                    raise ValueError(
                        f"cpumap.cpus: CPU {c} does not exist (host.cpus = {n}); the kernel "
                        "refuses a key that is not a possible CPU")
        if self.xdp is None:
            if self.cpumap is not None:
                raise ValueError("cpumap: entries need an xdp program that redirects to them")
            return
        if self.nic.rx_mode == "netif_rx":
            raise ValueError("xdp: a device with an XDP program polls with NAPI (veth "
                             "switches to it); set nic.rx_mode: napi")
        for i, rule in enumerate(self.xdp.rules):
            where = f"xdp.rules[{i}]"
            if rule.action == "redirect-cpu":
                if self.cpumap is None:
                    raise ValueError(f"{where}: redirect-cpu needs a cpumap section")
                try:
                    cpus = rule.cpu_list()
                except ValueError:
                    raise ValueError(
                        f"{where}.cpus: {rule.cpus!r} is not a CPU list like '1-6'") from None
                for c in cpus:
                    if not 0 <= c < n:
                        raise ValueError(
                            f"{where}.cpus: CPU {c} does not exist (host.cpus = {n})")
            if rule.action == "redirect-xsk" and not any(a.afxdp for a in self.apps):
                raise ValueError(f"{where}: redirect-xsk needs an app with an afxdp section "
                                 "(the sockets in the XSKMAP)")
            q = rule.match.rx_queue
            if q is not None and q >= self.nic.queues:
                raise ValueError(f"{where}.match.rx_queue: queue {q} does not exist")
            if q is not None and self.nic.arfs is not None:
                raise ValueError(f"{where}.match.rx_queue: rules on the rx queue with aRFS "
                                 "(which moves flows between queues) are not modelled")


def _fmt_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or "[" in str(part):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def validation_message(err: ValidationError) -> str:
    """First pydantic error as 'field.path: message' (one line)."""
    e = err.errors()[0]
    loc = _fmt_loc(tuple(x for x in e["loc"] if not str(x).startswith(("literal[", "dict["))))
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = "unknown key; check the spelling against docs/scenario.md"
    elif e["type"] == "missing":
        msg = "required field is missing"
    return f"{loc}: {msg}" if loc else msg


def scenario_from_dict(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the top level must be a mapping of keys (name, host, ...)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise UsageError(f"{source}: {validation_message(err)}") from None


def load_yaml(path: str | Path, missing: str = "no such scenario file; give a path or a "
              "built-in name") -> dict:
    """Parse a YAML file; a missing file or bad YAML is a one-line UsageError."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: {missing}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UsageError(f"{p}:{where} malformed YAML ({getattr(err, 'problem', err)})") from None
    return data


BUILTIN_DIR = Path(__file__).parent / "scenarios"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def load_scenario(ref: str | Path) -> Scenario:
    """Load a scenario from a YAML path or a built-in name (e.g. 'default')."""
    p = Path(ref)
    if not p.exists() and (BUILTIN_DIR / f"{ref}.yaml").exists():
        p = BUILTIN_DIR / f"{ref}.yaml"
    data = load_yaml(p)
    pcap = (data.get("traffic") or {}).get("pcap") if isinstance(data, dict) else None
    if isinstance(pcap, dict) and isinstance(pcap.get("file"), str):
        f = Path(pcap["file"])
        if not f.is_absolute():
            pcap["file"] = str(p.parent / f)  # relative to the scenario file
    return scenario_from_dict(data, str(ref))


def with_overrides(sc: Scenario, overrides: dict[str, Any]) -> Scenario:
    """Return a copy with dotted-path overrides applied ('kernel.netdev_max_backlog': 2000)."""
    data = copy.deepcopy(sc.model_dump(mode="python", exclude_none=True))
    for path, value in overrides.items():
        node = data
        parts = path.split(".")
        for part in parts[:-1]:
            key: Any = int(part) if isinstance(node, list) else part
            if isinstance(node, dict) and key not in node:
                node[key] = {}
            node = node[key]
        last: Any = int(parts[-1]) if isinstance(node, list) else parts[-1]
        node[last] = value
    return scenario_from_dict(data, sc.name)
