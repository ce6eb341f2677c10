"""Scenario files: the YAML schema (pydantic) and loading with one-line errors.

A scenario describes a host (CPUs, kernel version, cost profile), its NIC (queues, RSS,
IRQ affinity), the kernel's steering knobs, the offered traffic and the applications.
Values the kernel would round (powers of two) are rounded the kernel's way when the
scenario is compiled (see ``rxlab.build``) and reported in the result's ``config``.

The schema is the edge of the simulator: every number is finite and inside the range
the kernel (or physics) allows, and every queue and CPU the compiled loop will index
exists, so nothing a user writes reaches the loop unchecked. Values are read the way
the kernel reads them: CPU lists and masks through ``rxlab.cpuset``, and a YAML number
where text is meant (``host.kernel: 6.10``, ``rps_cpus: 10``) keeps its source text.
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from rxlab import cpuset, drivers, knobs
from rxlab.errors import UsageError
from rxlab.inputs import load_yaml
from rxlab.kernel.versions import parse_version
from rxlab.profiles import MAX_COST_NS
from rxlab.scenario_checks import KERNEL_RELEASES, check_scenario
from rxlab.traffic.spec import MAX_PPS, MAX_SECONDS, MIN_PPS, TrafficSpec, _Strict, in_range

INT_MAX = (1 << 31) - 1  # the kernel's int sysctls (proc_dointvec)
ICE_ITR_MAX_US = 8160  # ICE_ITR_MAX, drivers/net/ethernet/intel/ice/ice_txrx.h
MAX_PATH_PARTS = 16  # dotted --set paths: the deepest field is 6 parts

_TIME_WHY = "times are int64 ns; rxlab allows up to 1e6 s"
_STEP_WHY = "rxlab's time step is 1 ns; times are int64 ns up to 1e6 s"


def _cpu_list(value: Any) -> list[int]:
    """'0-3,6' | 5 | [0, 2] -> sorted CPU list (kept for callers; see rxlab.cpuset)."""
    return cpuset.cpu_set(value)


def hex_mask_to_cpus(mask: str) -> list[int]:
    """A sysfs CPU bitmap ('ff', '00000001,00000000') -> list of CPU numbers."""
    return cpuset.parse_mask(mask)


# ------------------------------------------------------------------ field helpers


def _cpus_text(v: Any) -> Any:
    """A YAML number written other than plainly ('010') is read as a cpulist, in decimal."""
    text = getattr(v, "yaml_text", None)
    return text if text is not None and text != str(int(v)) else v


def _nonempty_cpus(v: Any) -> Any:
    """A CPU-set field: a cpulist, a CPU or a list, naming at least one CPU."""
    try:
        cpus = cpuset.cpu_set(v)
    except cpuset.CpuSetError as err:
        raise ValueError(str(err)) from None
    if not cpus:
        raise ValueError(f"{v!r} names no CPU; give at least one, e.g. '0-3' or [0, 1]")
    return v


CpuSet = Annotated[str | int | list[int], BeforeValidator(_cpus_text),
                   AfterValidator(_nonempty_cpus)]


def _count(v: Any, what: str, example: str) -> Any:
    """A count is never parsed from a CPU list or range: say what to write instead."""
    if isinstance(v, str) and not v.strip().isdigit():
        try:
            n = len(cpuset.parse_cpulist(v))
        except cpuset.CpuSetError:
            n = 0
        hint = f" ({v!r} names {n}: write {n})" if n else ""
        raise ValueError(f"{v!r} is not a count; {what} is a number, e.g. {example}{hint}")
    return v


def _mask(v: Any) -> str:
    try:
        return cpuset.mask_text(v)
    except cpuset.CpuSetError as err:
        raise ValueError(str(err)) from None


def _kernel_version(v: Any) -> str:
    """host.kernel as text; a YAML number keeps its text (6.10 stays "6.10")."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ValueError(f"{v!r} is not a kernel version; write it as a string, e.g. \"6.19\"")
    text = str(getattr(v, "yaml_text", v)).strip()
    known = ", ".join(f"{m}.0-{m}.{last}" for m, last in KERNEL_RELEASES.items())
    try:
        major, minor = parse_version(text)
    except UsageError:
        raise ValueError(f"{text!r} is not a kernel version; write MAJOR.MINOR[.PATCH] as a "
                         f"string, e.g. \"6.19\" (known: {known})") from None
    if minor > KERNEL_RELEASES.get(major, -1):
        raise ValueError(f"{text!r} is not a Linux release rxlab knows; use one of {known}")
    return text


# ------------------------------------------------------------------ the schema


class Jitter(_Strict):
    dist: Literal["deterministic", "exponential", "lognormal"] = "deterministic"
    cv: Annotated[float, in_range(0, 100, "", "a larger cv puts single lognormal draws past "
                                "int64 ns", lo_open=True)] = Field(
        0.5, description="coefficient of variation for lognormal")


CostNs = Annotated[float, in_range(0, MAX_COST_NS, "ns", "a stage costs at most 1 s per unit")]


class Host(_Strict):
    cpus: int = Field(4, ge=1, le=4096)
    kernel: str = "6.19"
    hz: Literal[100, 250, 300, 1000] = 1000
    cost_profile: str = "modern-x86"
    costs: dict[str, CostNs] = Field(default_factory=dict, description="per-stage overrides")
    cost_jitter: Jitter = Field(default_factory=Jitter)

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpu_count(cls, v: Any) -> Any:
        return _count(v, "host.cpus", "16")

    @field_validator("kernel", mode="before")
    @classmethod
    def _kernel_text(cls, v: Any) -> str:
        return _kernel_version(v)


class NtupleMatch(_Strict):
    proto: Literal["tcp", "udp"] | None = None
    src_port: int | None = Field(None, ge=0, le=65535)
    dst_port: int | None = Field(None, ge=0, le=65535)
    group: str | None = None


class NtupleRule(_Strict):
    """`ethtool -N DEV flow-type ... action Q | context C`: steer matching flows."""

    match: NtupleMatch
    queue: int | None = Field(None, ge=0)
    context: int | None = Field(None, ge=1, le=(1 << 32) - 1)
    ring_cookie: int = Field(0, ge=0, le=INT_MAX)

    @model_validator(mode="after")
    def _one_action(self):
        if (self.queue is None) == (self.context is None):
            raise ValueError("give exactly one of queue or context")
        return self


def _indirection_form(v: Any) -> Any:
    """'default', {equal: N}, {weight: [...]} or a list of queues (checked against
    nic.queues in rxlab.scenario_checks)."""
    if v == "default" or isinstance(v, dict):
        return v
    if isinstance(v, list):
        if not v:  # ethtool -X takes no empty table: the queue of a hash would be x % 0
            raise ValueError("an empty table steers no packet; list at least one queue, "
                             "or use default or {equal: N}")
        for k, q in enumerate(v):
            if isinstance(q, bool) or not isinstance(q, int):
                raise ValueError(f"entry {k} ({q!r}) is not a queue number")
        return [int(q) for q in v]
    raise ValueError(f"{v!r} is not a table; use default, {{equal: N}}, "
                     "{weight: [w0, w1, ...]} or a list of queues")


Indirection = Annotated[Any, AfterValidator(_indirection_form)]


class RssContext(_Strict):
    id: int = Field(ge=1, le=(1 << 32) - 1)
    indirection: Indirection = "default"


class Rss(_Strict):
    hfunc: Literal["toeplitz"] = "toeplitz"
    key: str | None = None  # hex; default: Microsoft verification key
    input_xfrm: Literal["none", "sym-xor", "sym-or-xor"] = "none"
    table_size: int | None = Field(None, ge=1, le=65536, description="default: the driver's")
    indirection: Indirection = "default"
    flow_hash: dict[Literal["tcp4", "udp4", "tcp6", "udp6"], str] = Field(default_factory=dict)
    contexts: list[RssContext] = Field(default_factory=list)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        from rxlab.nic.toeplitz import parse_key

        if v is not None:
            try:
                parse_key(v)
            except ValueError as err:
                raise ValueError(f"{err}; give 40+ bytes of hex, e.g. 6d:5a:56:da:...") from None
        return v

    @field_validator("table_size")
    @classmethod
    def _pow2(cls, v: int | None) -> int | None:
        if v is not None and v & (v - 1):
            raise ValueError(
                f"{v} is not a power of two; rxlab picks the entry as hash & (size - 1), as "
                "NICs with power-of-two tables do (ixgbe 128 or 512, i40e 512, mlx5 a power "
                "of two from 256); use e.g. 128")
        return v

    @field_validator("flow_hash")
    @classmethod
    def _letters(cls, v: dict[str, str]) -> dict[str, str]:
        for k, s in v.items():
            if not s or set(s) - set("sdfn"):
                raise ValueError(
                    f"{k}: {s!r} uses letters other than s,d,f,n (ethtool rx-flow-hash)"
                )
        return v


# ice_init_pf: serv_tmr_period = HZ, one second (drivers/net/ethernet/intel/ice/ice_main.c)
ICE_ARFS_PERIOD_S = 1.0


class Arfs(_Strict):
    """Accelerated RFS: the driver's ndo_rx_flow_steer and its filter table."""

    model: Literal["ice-hash-match", "ice-tuple-match", "mlx5"]
    capacity: int = Field(8192, ge=1, le=1 << 22, description="hardware n-tuple filters")
    delay_us: Annotated[float, in_range(0, MAX_SECONDS * 1e6, "us", _TIME_WHY)] = Field(
        50.0, description="queue_work -> the kworker that writes filters is woken")
    # None: ice's 1 s (ICE_ARFS_PERIOD_S); not a default value, so that a scenario
    # re-read after an override (with_overrides) does not seem to set it for mlx5
    period_s: Annotated[float | None, in_range(1e-3, MAX_SECONDS, "s", "a kernel timer fires "
                                             "at most once a jiffy, 1 ms at HZ=1000")] = Field(
        None, description="ice service timer (a run that syncs and expires), 1.0 s when not "
                          "given; mlx5 has none")

    @property
    def service_period_s(self) -> float:
        return ICE_ARFS_PERIOD_S if self.period_s is None else self.period_s

    @model_validator(mode="after")
    def _timer_is_ice_s(self):
        if self.model == "mlx5" and self.period_s is not None:
            raise ValueError("period_s is ice's service timer; mlx5 has no expiry timer (each "
                             "work item expires rules, en_arfs.c arfs_handle_work): remove it")
        return self


class Nic(_Strict):
    """The NIC and its driver; fields left out take the driver preset's value
    (``rxlab.drivers``), and a dump leaves them out again so that a changed driver
    brings its own."""

    driver: str = Field("generic", description="a preset name or a preset YAML file")
    queues: int = Field(4, ge=1, le=4096)
    ring_size: int | None = Field(None, ge=1, le=65536, description="default: the driver's")
    link_gbps: Annotated[float, in_range(0.01, 1e6, "Gb/s", "from 10BASE-T's 10 Mb/s up")] = 10.0
    max_pps: Annotated[float | None, in_range(MIN_PPS, MAX_PPS, "packets/s",
                                            "the traffic rate bounds")] = Field(
        None, description="NIC packet-rate ceiling")
    nic_fifo: int = Field(512, ge=0, le=INT_MAX, description="packets buffered above max_pps")
    irq_affinity: list[int] | None = None
    threaded: bool = Field(False, description="/sys/class/net/DEV/threaded (5.12+): each "
                           "queue's NAPI polls in its kthread napi/DEV-ID, not in softirq")
    napi_thread_affinity: list[int] | None = Field(
        None, description="CPU of each queue's napi/DEV-ID kthread (taskset); default: the "
        "CPU of the queue's interrupt")
    napi_weight: int = Field(64, ge=1, le=65536)
    rx_mode: Literal["napi", "netif_rx"] = Field(
        "napi", description="napi: descriptor ring + NAPI poll; netif_rx: veth/tun/legacy"
    )
    rx_usecs: Annotated[float, in_range(0, ICE_ITR_MAX_US, "us", "the largest rx-usecs of "
                                      "common drivers: ICE_ITR_MAX in "
                                      "drivers/net/ethernet/intel/ice/ice_txrx.h")] = Field(
        0.0, description="interrupt moderation delay")
    napi_defer_hard_irqs: int | dict[int, int] = Field(
        0, description="/sys/class/net/DEV/napi_defer_hard_irqs (5.8+): empty polls the IRQ "
        "stays masked for, with gro_flush_timeout; per rx queue's NAPI (netdev netlink "
        "napi-set, 6.13+), or one for all")
    gro_flush_timeout: int | dict[int, int] = Field(
        0, description="/sys/class/net/DEV/gro_flush_timeout, ns (3.19+): the NAPI hrtimer "
        "that re-polls while IRQs are deferred; per rx queue's NAPI (6.13+), or one for all")
    rxhash: bool = True
    rss: Rss = Field(default_factory=Rss)
    ntuple: list[NtupleRule] = Field(default_factory=list)
    arfs: Arfs | None = None

    _preset: Any = PrivateAttr(default=None)  # rxlab.drivers.Preset
    _from_preset: dict = PrivateAttr(default_factory=dict)  # field path -> value filled

    @field_validator("queues", mode="before")
    @classmethod
    def _queue_count(cls, v: Any) -> Any:
        return _count(v, "nic.queues", "8")

    @field_validator("driver", mode="before")
    @classmethod
    def _driver(cls, v: Any) -> Any:
        if isinstance(v, str):
            drivers.load(v)  # an unknown name or a bad preset file is a one-line error
        return v

    @model_validator(mode="after")
    def _fill_from_preset(self):
        pre = drivers.load(self.driver)
        self._preset, self._from_preset = pre, {}
        if self.ring_size is None:
            self.ring_size = self._from_preset["nic.ring_size"] = pre.ring_size.value
        if self.rss.table_size is None:
            self.rss.table_size = drivers.table_size(pre, self.queues)
            self._from_preset["nic.rss.table_size"] = self.rss.table_size
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        data = handler(self)
        if not isinstance(data, dict):
            return data
        if "nic.ring_size" in self._from_preset:  # values the preset filled stay its own
            data.pop("ring_size", None)
        if "nic.rss.table_size" in self._from_preset and isinstance(data.get("rss"), dict):
            data["rss"].pop("table_size", None)
        return data

    def preset(self) -> drivers.Preset:
        return self._preset if self._preset is not None else drivers.load(self.driver)

    def from_preset(self) -> dict:
        return dict(self._from_preset)

    @field_validator("napi_defer_hard_irqs", "gro_flush_timeout")
    @classmethod
    def _deferral(cls, v, info):
        # napi_defer_hard_irqs_store: > S32_MAX is -ERANGE (net/core/net-sysfs.c)
        top = INT_MAX if info.field_name == "napi_defer_hard_irqs" else int(MAX_SECONDS * 1e9)
        for n in v.values() if isinstance(v, dict) else [v]:
            if not 0 <= n <= top:
                raise ValueError(f"{n} is out of range 0..{top}"
                                 + (" ns" if info.field_name == "gro_flush_timeout" else ""))
        return v

    @field_validator("irq_affinity", "napi_thread_affinity", mode="before")
    @classmethod
    def _irq_cpulist(cls, v: Any) -> Any:
        """A cpulist here means one CPU per queue, in order ('0-3': queue q on CPU q)."""
        if v is None or isinstance(v, list):
            return v
        try:
            return cpuset.cpu_set(v)
        except cpuset.CpuSetError as err:
            raise ValueError(str(err)) from None


class Kernel(_Strict):
    rps_cpus: dict[int, str] | str | None = None  # per-queue hex masks, or one for all
    netdev_max_backlog: int = Field(1000, ge=0, le=INT_MAX)
    netdev_budget: int = Field(300, ge=1, le=INT_MAX)
    netdev_budget_usecs: int | None = Field(None, ge=1, le=INT_MAX)
    dev_weight: int = Field(64, ge=1, le=INT_MAX)
    flow_limit_cpu_bitmap: str = "0"
    flow_limit_table_len: int = Field(4096, ge=2, le=1 << 20)
    flow_limit_variant: Literal["current", "2013"] = "current"
    hashrnd: str | None = None  # 32 hex chars: the boot-random flow-dissector key
    rps_sock_flow_entries: int = 0
    rps_flow_cnt: int | dict[int, int] = Field(0, description="per rx queue, or one for all")
    thread_backlog_napi: bool = Field(
        False, description="boot parameter thread_backlog_napi (6.10+; always on with "
        "PREEMPT_RT): a CPU's backlog that RPS schedules from another CPU is processed by "
        "its backlog_napi/N thread, woken directly instead of by an IPI")
    busy_read: int = Field(0, ge=0, le=INT_MAX, description="net.core.busy_read, us: a "
                           "blocking read of an empty socket busy-polls its NAPI this long "
                           "(the default of SO_BUSY_POLL); 0 = off")

    @field_validator("flow_limit_cpu_bitmap", mode="before")
    @classmethod
    def _bitmap(cls, v: Any) -> str:
        return _mask(v)

    @field_validator("rps_cpus", mode="before")
    @classmethod
    def _rps_masks(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {q: _mask(m) for q, m in v.items()}
        return v if v is None else _mask(v)

    @field_validator("rps_flow_cnt")
    @classmethod
    def _flow_cnt(cls, v):
        for n in v.values() if isinstance(v, dict) else [v]:
            if n < 0:
                raise ValueError(f"{n} is negative; use 0 (off) or a table size")
            if n == 1:
                raise ValueError("1 gives log 0 and hash_32(h, 0), undefined in C "
                                 "(store_rps_dev_flow_table_cnt); use 0 or 2 and more")
            if n > 1 << 32:
                raise ValueError(f"{n} is above the kernel maximum {1 << 32} (the table "
                                 "mask is a u32: store_rps_dev_flow_table_cnt, "
                                 "net/core/net-sysfs.c); use a smaller power of two")
        return v

    @field_validator("flow_limit_table_len")
    @classmethod
    def _table_len(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError(f"{v} is not a power of two (flow_limit_table_len_sysctl "
                             "returns -EINVAL); use e.g. 4096")
        return v

    @field_validator("rps_sock_flow_entries")
    @classmethod
    def _sock_entries(cls, v: int) -> int:
        if not 0 <= v <= 1 << 29:
            raise ValueError(f"{v} is out of range 0..{1 << 29} (rps_sock_flow_sysctl, "
                             "net/core/sysctl_net_core.c, returns -EINVAL above 2^29)")
        return v

    @field_validator("hashrnd")
    @classmethod
    def _hashrnd(cls, v: str | None) -> str | None:
        if v is not None:
            s = v.strip().lower()
            if len(s) != 32 or set(s) - set("0123456789abcdef"):
                raise ValueError(f"{v!r} is not 32 hex digits; the flow dissector's key is "
                                 "128 bits, e.g. '000102030405060708090a0b0c0d0e0f'")
        return v


XDP_ACTIONS = ("pass", "drop", "tx", "aborted", "redirect-cpu", "redirect-xsk")


class XdpMatch(NtupleMatch):
    rx_queue: int | None = Field(None, ge=0, description="the xdp_md rx_queue_index")


class XdpRule(_Strict):
    """One branch of the XDP program: flows that match get this verdict."""

    match: XdpMatch = Field(default_factory=XdpMatch)
    action: Literal["pass", "drop", "tx", "aborted", "redirect-cpu", "redirect-xsk"] = Field(
        description="redirect-xsk: to the AF_XDP socket in XSKMAP[rx_queue_index]")
    cpus: CpuSet | None = Field(None, description="redirect-cpu: cpumap keys")
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
    """A native XDP program on every rx queue (``bpf_prog_run_xdp`` in the driver's NAPI poll)."""

    rules: list[XdpRule] = Field(default_factory=list, description="first match wins")
    default: Literal["pass", "drop", "tx", "aborted"] = "pass"
    hash_metadata: bool = Field(
        False, description="store the RX hash as frame metadata; the cpumap skb gets it")


class Cpumap(_Strict):
    """BPF_MAP_TYPE_CPUMAP entries: key = destination CPU, value = ptr_ring qsize."""

    cpus: CpuSet
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
    user_ns: CostNs = Field(0.0, description="application work per request (user time)")
    syscall_ns: CostNs | None = Field(None, description="recvmsg cost; default: profile")


Seconds = Annotated[float, in_range(0, MAX_SECONDS, "s", _TIME_WHY)]
Period = Annotated[float, in_range(1e-9, MAX_SECONDS, "s", _STEP_WHY)]


class Move(_Strict):
    at: Seconds
    cpu: int = Field(ge=0)


class Migrate(_Strict):
    every_s: Period = Field(description="a random move this often")
    cpus: CpuSet = Field(description="CPUs a random move may pick")


class App(_Strict):
    name: str = "app"
    cpus: CpuSet = Field(0, description="one thread per CPU listed")
    groups: list[str] | Literal["all"] = "all"
    cost: AppCost = Field(default_factory=AppCost)
    rcvbuf: int = Field(212992, ge=1024, le=INT_MAX - 1,
                        description="SO_RCVBUF bytes (sk_rcvbuf is an int)")
    batch: int = Field(8, ge=1, le=1024, description="packets a thread reads per wake-up")
    connected: bool | None = Field(None, description="recvmsg records the flow for RFS; "
                                   "default: true for TCP, false for UDP (unconnected)")
    migrate: Migrate | list[Move] | None = None
    spread: Literal["hash", "round_robin"] = Field(
        "hash", description="flows to threads: SO_REUSEPORT hash, or one by one in turn"
    )
    afxdp: AfXdp | None = Field(None, description="read AF_XDP sockets instead of UDP/TCP")
    busy_poll: int | None = Field(None, ge=0, le=INT_MAX, description="SO_BUSY_POLL, us: "
                                  "busy-poll an empty socket's NAPI this long before "
                                  "sleeping; default: kernel.busy_read")
    prefer_busy_poll: bool = Field(False, description="SO_PREFER_BUSY_POLL (5.11+): a "
                                   "softirq poll that uses its whole budget leaves the NAPI "
                                   "to the busy poller (needs IRQ deferral)")
    busy_poll_budget: int = Field(0, ge=0, le=65535, description="SO_BUSY_POLL_BUDGET "
                                  "(5.11+): packets per busy poll; 0 = BUSY_POLL_BUDGET (8)")

    def cpu_list(self) -> list[int]:
        return _cpu_list(self.cpus)


class Metrics(_Strict):
    interval: Period = Field(0.01, description="time-series interval, seconds")
    warmup: Seconds = Field(0.0, description="good/bad queue counts start after this")


class Scenario(_Strict):
    name: str = "scenario"
    description: str = ""
    seed: int = Field(1, ge=0, le=(1 << 64) - 1)
    duration: Period = 0.1
    drain: Seconds = Field(0.05, description="seconds simulated after traffic stops")
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
        check_scenario(self)  # indices and sets against host.cpus and nic.queues
        return self


# ------------------------------------------------------------------ errors


def _model_names(cls: type = _Strict) -> set[str]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub.__name__} | _model_names(sub)
    return out


def _fmt_loc(loc: tuple) -> str:
    models = _model_names()  # a union's member ('Migrate') is no part of the field's path
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif (part in ("function-after", "function-before") or "[" in str(part)
              or part in models):
            continue
        else:
            s = str(part)
            out += ("." if out else "") + (s if s.isprintable() else repr(s))
    return out


def _model_at(loc: tuple) -> type | None:
    """The model that holds the last key of ``loc``, walking the schema from Scenario
    (a union's member names itself in the path; a list index or a dict key is skipped)."""
    by_name = {c.__name__: c for c in _all_models()}
    model: Any = Scenario
    for part in loc[:-1]:
        if isinstance(part, int) or "[" in str(part) or part in ("function-after",
                                                                 "function-before"):
            continue
        if part in by_name:
            model = by_name[part]
            continue
        field = getattr(model, "model_fields", {}).get(part)
        model = _first_model(field.annotation) if field else None
        if model is None:
            return None
    return model


def _all_models(cls: type = _Strict) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_models(sub)]
    return out


def _first_model(ann: Any) -> type | None:
    """The first _Strict model inside an annotation (Optional, list, Annotated, union)."""
    if isinstance(ann, type) and issubclass(ann, _Strict):
        return ann
    for arg in getattr(ann, "__args__", ()) or getattr(ann, "__metadata__", ()):
        found = _first_model(arg)
        if found:
            return found
    return _first_model(ann.__origin__) if hasattr(ann, "__origin__") else None


def _unknown_key(loc: tuple) -> str:
    """A knob rxlab knows but does not model gets its own line; a misspelling gets the
    nearest key of its section, so the user can tell the two apart."""
    path = [p for p in loc if isinstance(p, str) and "[" not in p]
    key = loc[-1]
    if len(path) == 2 and isinstance(key, str):
        knob = knobs.find(path[0], key)
        if knob:
            return knobs.refusal(knob)
    model = _model_at(loc) if isinstance(key, str) else None
    near = difflib.get_close_matches(key, list(model.model_fields), 1, 0.7) if model else []
    if near:
        return f"unknown key; did you mean {near[0]}? (docs/scenario.md lists every key)"
    return "unknown key; check the spelling against docs/scenario.md"


def validation_message(err: ValidationError) -> str:
    """First pydantic error as 'field.path: message' (one line)."""
    e = err.errors()[0]
    loc = _fmt_loc(tuple(x for x in e["loc"] if not str(x).startswith(("literal[", "dict["))))
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = _unknown_key(tuple(e["loc"]))
    elif e["type"] == "missing":
        msg = "required field is missing"
    elif e["type"] in ("model_type", "model_attributes_type", "dict_type"):
        got = e.get("input")
        msg = (f"must be a mapping of keys (a section), not {type(got).__name__} "
               f"{str(got)[:40]!r}; see docs/scenario.md")
    elif e["type"] == "finite_number":
        msg = "NaN and infinity are not values here; give a finite number"
    elif e["type"] in ("int_parsing", "int_from_float") and isinstance(e.get("input"), str):
        msg = f"{e['input']!r} is not a whole number; write one, e.g. 8"
    msg = " ".join(msg.split())  # one line whatever the input held
    return f"{loc}: {msg}" if loc else msg


def scenario_from_dict(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the top level must be a mapping of keys (name, host, ...)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise UsageError(f"{source}: {validation_message(err)}") from None
    except RecursionError:
        raise UsageError(f"{source}: values nested too deeply to validate") from None


BUILTIN_DIR = Path(__file__).parent / "scenarios"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def _resolve(ref: str | Path) -> Path:
    """A path, or a built-in scenario by name with or without '.yaml'."""
    p = Path(ref)
    if p.exists() or isinstance(ref, Path) or "/" in str(ref):
        return p
    name = str(ref).removesuffix(".yaml")
    if (BUILTIN_DIR / f"{name}.yaml").is_file():
        return BUILTIN_DIR / f"{name}.yaml"
    return p


def load_scenario(ref: str | Path) -> Scenario:
    """Load a scenario from a YAML path or a built-in name ('default' or 'default.yaml')."""
    p = _resolve(ref)
    data = load_yaml(p, "no such scenario file; give a path or a built-in name ("
                     + ", ".join(builtin_names()) + ")")
    traffic = data.get("traffic") if isinstance(data, dict) else None
    pcap = traffic.get("pcap") if isinstance(traffic, dict) else None
    if isinstance(pcap, dict) and isinstance(pcap.get("file"), str):
        f = Path(pcap["file"])
        if not f.is_absolute():
            pcap["file"] = str(p.parent / f)  # relative to the scenario file
    return scenario_from_dict(data, str(ref))


# ------------------------------------------------------------------ overrides


def _index(part: str) -> bool:
    return part.isascii() and part.isdigit()  # '³'.isdigit() is True, int('³') fails


def _show(path: str) -> str:
    return path if path.isprintable() else repr(path)


def set_path(data: dict, path: str, value: Any) -> None:
    """Set ``data[a][b][0]...`` for the dotted path 'a.b.0'; a path that does not lead
    anywhere is a one-line UsageError naming it and the fix."""
    parts = path.split(".") if isinstance(path, str) else []
    if not parts or any(not p.strip() for p in parts):
        raise UsageError(f"{str(path)!r}: not a dotted path; write e.g. "
                         "kernel.dev_weight=128 or apps.0.cpus=0-3")
    if len(parts) > MAX_PATH_PARTS:
        raise UsageError(f"{_show(path)[:60]}...: {len(parts)} parts, more than any field "
                         f"has ({MAX_PATH_PARTS}); check the path against docs/scenario.md")
    node: Any = data
    for i, part in enumerate(parts):
        where = ".".join(parts[:i]) or "the scenario"
        if isinstance(node, list):
            n = len(node)
            span = {0: "it is empty", 1: f"use {where}.0"}.get(n, f"use {where}.0 .. "
                                                              f"{where}.{n - 1}")
            if not _index(part):
                raise UsageError(f"{_show(path)}: {_show(part)} is not an index; {where} is a "
                                 f"list ({span})")
            key: Any = int(part)
            if key >= n:
                raise UsageError(f"{_show(path)}: {where} has no entry {key} ({span}); to "
                                 f"add one, set the whole list: {where}=[...]")
        elif isinstance(node, dict):
            key = int(part) if _index(part) and int(part) in node else part
        else:
            raise UsageError(f"{_show(path)}: {where} is a value ({node!r}), not a section; "
                             f"set it whole with {where}=VALUE")
        if i == len(parts) - 1:
            node[key] = value
        else:
            if isinstance(node, dict) and node.get(key) is None:
                node[key] = {}
            node = node[key]


def with_overrides(sc: Scenario, overrides: dict[str, Any]) -> Scenario:
    """Return a copy with dotted-path overrides applied ('kernel.netdev_max_backlog': 2000)."""
    data = copy.deepcopy(sc.model_dump(mode="python", exclude_none=True))
    for path, value in overrides.items():
        set_path(data, path, value)
    return scenario_from_dict(data, sc.name)
