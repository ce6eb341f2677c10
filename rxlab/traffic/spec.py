"""Schema of the scenario's ``traffic:`` section.

Every validator raises ``PydanticCustomError`` rather than ``ValueError`` so the message
reads as written (no "Value error, " prefix) once the lead prefixes the field path.
Cross-field checks live on ``GroupSpec`` field validators and read earlier fields from
``info.data``, so the error location still names the offending field; field order in
``GroupSpec`` is therefore the dependency order, not the YAML order.
"""

from __future__ import annotations

import ipaddress
import math
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

MIN_FRAME, MAX_FRAME = 64, 9018
# Rate bounds keep the stream's exact integer ns arithmetic inside int64.
MIN_PPS, MAX_PPS = 1e-3, 1e10  # 1e10: beyond any NIC
# Every time in a scenario is at most this many seconds: (duration + drain) * 1e9 ns and
# any start or stop stay far inside int64 (9.2e18 ns = 292 years).
MAX_SECONDS = 1e6
MAX_FLOWS = (1 << 31) - 1  # flow ids are int32 in the loop's rings and queues
SPOOFED_FLOWS = 65536
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_TIME_WHY = "times are int64 ns; rxlab allows up to 1e6 s"


def _bad(msg: str) -> PydanticCustomError:
    return PydanticCustomError("traffic", msg)


def in_range(lo: float, hi: float, unit: str, why: str, *, lo_open: bool = False):
    """A range check whose error names the range and where it comes from (NaN and
    infinity never get here: the models refuse them, ``allow_inf_nan=False``)."""
    u = f" {unit}" if unit else ""

    def check(v):
        if v is not None and (v > hi or (v <= lo if lo_open else v < lo)):
            low = f"> {lo:g}" if lo_open else f">= {lo:g}"
            raise _bad(f"must be {low} and <= {hi:g}{u} ({why}); got {v:g}")
        return v

    return AfterValidator(check)


def _is_text(ann: Any) -> bool:
    """Is a field's type text (str, a Literal of strings, list[str], optionally None)?"""
    if ann is str:
        return True
    origin, args = get_origin(ann), get_args(ann)
    if origin is Literal:
        return all(isinstance(a, str) for a in args)
    if origin is list:
        return args == (str,)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and _is_text(rest[0])
    return False


_TEXT_FIELDS: dict[type, frozenset[str]] = {}


def _is_number(ann: Any) -> bool:
    """Is a field's type a number (int, float, optionally None), a list of numbers or a
    mapping to numbers? There a YAML boolean is a mistake, not 1 or 0."""
    if ann in (int, float):
        return True
    origin, args = get_origin(ann), get_args(ann)
    if origin is list:
        return len(args) == 1 and _is_number(args[0])
    if origin is dict:
        return len(args) == 2 and _is_number(args[1])
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return bool(rest) and all(_is_number(a) for a in rest)
    return False


def _int_keyed(ann: Any) -> bool:
    """Does a field's type take a mapping keyed by numbers (a queue's, a CPU's)?"""
    origin, args = get_origin(ann), get_args(ann)
    if origin is dict:
        return bool(args) and args[0] is int
    if origin in (Union, types.UnionType):
        return any(_int_keyed(a) for a in args)
    return False


def _holds_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    if isinstance(v, list):
        return any(isinstance(x, bool) for x in v)
    return isinstance(v, dict) and any(isinstance(x, bool) for x in v.values())


def _text(v: Any) -> Any:
    return v.yaml_text if hasattr(v, "yaml_text") else v


class _Strict(BaseModel):
    """Unknown keys are errors, NaN and infinity are refused in every float, and a YAML
    number where text is meant (a name, a version, ``flow_limit_variant: 2013``) is the
    text as written (``rxlab.scenario``'s loader keeps it)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _yaml_text(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if cls not in _TEXT_FIELDS:
            _TEXT_FIELDS[cls] = frozenset(f.alias or k for k, f in cls.model_fields.items()
                                          if _is_text(f.annotation))
        _no_bool_numbers(cls, data)
        fields = _TEXT_FIELDS[cls]
        if not any(k in fields for k in data):
            return data
        return {k: ([_text(x) for x in v] if isinstance(v, list) else _text(v))
                if k in fields else v for k, v in data.items()}


_NUMBER_FIELDS: dict[type, frozenset[str]] = {}
_KEYED_FIELDS: dict[type, frozenset[str]] = {}


def _no_bool_numbers(cls: type, data: dict) -> None:
    """pydantic's lax mode reads true as 1: ``--set duration=true`` would run a second."""
    if cls not in _NUMBER_FIELDS:
        _NUMBER_FIELDS[cls] = frozenset(f.alias or k for k, f in cls.model_fields.items()
                                        if _is_number(f.annotation))
        _KEYED_FIELDS[cls] = frozenset(f.alias or k for k, f in cls.model_fields.items()
                                       if _int_keyed(f.annotation))
    for k in _NUMBER_FIELDS[cls]:
        if k in data and _holds_bool(data[k]):
            raise PydanticCustomError("bool_number", "{field}: a boolean (true, false) is not "
                                      "a number; give a number", {"field": k})
    for k in _KEYED_FIELDS[cls]:
        if isinstance(data.get(k), dict) and any(isinstance(q, bool) for q in data[k]):
            raise PydanticCustomError("bool_key", "{field}: a boolean (true, false) is not a "
                                      "queue or CPU number; key it by number", {"field": k})


def _one_of(data: object, keys: tuple[str, ...], what: str) -> object:
    """Shared check for the "exactly one form" mappings (addresses, ports)."""
    if not isinstance(data, dict):
        forms = " | ".join(f"{{{k}: ...}}" for k in keys)
        raise _bad(f"must be a mapping, one of {forms}; got {data!r}")
    if set(data) - set(keys):
        return data  # let extra="forbid" name the unknown key
    given = [k for k in keys if data.get(k) is not None]  # None: as dumped by model_dump
    if len(given) != 1:
        forms = ", ".join(keys)
        raise _bad(f"{what} needs exactly one of {forms}; got {given or 'none'}")
    return data


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise _bad(f"{text!r} is not an IP address; write e.g. 10.0.0.1 or 2001:db8::1") from None


class AddrSpec(_Strict):
    """One address, a CIDR drawn from uniformly per flow, or a list cycled over flows."""

    # `list` is a builtin, hence the alias; dump by alias so a dumped spec re-validates.
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)

    addr: str | None = None
    cidr: str | None = None
    list_: list[str] | None = Field(None, alias="list")

    @model_validator(mode="before")
    @classmethod
    def _form(cls, data: object) -> object:
        return _one_of(data, ("addr", "cidr", "list"), "an address")

    @field_validator("addr")
    @classmethod
    def _addr(cls, v: str | None) -> str | None:
        return None if v is None else str(_ip(v))

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:  # host bits allowed (10.0.0.1/8 means 10.0.0.0/8), as `ip addr` accepts
            return str(ipaddress.ip_network(v, strict=False))
        except ValueError:
            raise _bad(f"{v!r} is not a CIDR; write e.g. 10.0.0.0/8 or 2001:db8::/32") from None

    @field_validator("list_")
    @classmethod
    def _list(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        if not v:
            raise _bad("is empty; give at least one address, e.g. [10.0.0.1, 10.0.0.2]")
        return [str(_ip(a)) for a in v]

    def version(self) -> set[int]:
        if self.cidr is not None:
            return {ipaddress.ip_network(self.cidr).version}
        return {ipaddress.ip_address(a).version for a in ([self.addr] if self.addr else self.list_)}


class PortSpec(_Strict):
    """A fixed port, a uniform random port per flow, or base + flow index."""

    value: int | None = Field(None, ge=0, le=65535)
    range: list[int] | None = None  # [lo, hi]; a list (not tuple) so yaml.safe_dump works
    sequential: int | None = Field(None, ge=0, le=65535)

    @model_validator(mode="before")
    @classmethod
    def _form(cls, data: object) -> object:
        return _one_of(data, ("value", "range", "sequential"), "a port")

    @field_validator("range")
    @classmethod
    def _range(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and not (len(v) == 2 and 0 <= v[0] <= v[1] <= 65535):
            raise _bad(f"{v} is not a port range; need [lo, hi] with 0 <= lo <= hi <= 65535")
        return v


class RateSpec(_Strict):
    pps: float
    per_flow: Literal["constant", "zipf", "explicit"] = "constant"
    zipf_s: float | None = None
    weights: list[float] | None = None

    @field_validator("pps")
    @classmethod
    def _pps(cls, v: float) -> float:
        if not math.isfinite(v) or v <= 0:
            raise _bad("must be > 0 (group total packets/s, e.g. pps: 100000)")
        if not MIN_PPS <= v <= MAX_PPS:
            raise _bad(f"{v:g} is outside {MIN_PPS:g}..{MAX_PPS:g} packets/s; change the rate")
        return v

    @field_validator("zipf_s")
    @classmethod
    def _zipf_s(cls, v: float | None) -> float | None:
        if v is not None and (not math.isfinite(v) or v <= 0):
            raise _bad("must be > 0 (Zipf exponent; 1.0 is classic Zipf)")
        return v

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return None
        if any(not math.isfinite(w) or w < 0 for w in v) or not any(w > 0 for w in v):
            raise _bad("needs finite weights >= 0, not all 0")
        return v

    @model_validator(mode="after")
    def _forms(self) -> RateSpec:
        if self.per_flow == "zipf" and self.zipf_s is None:
            raise _bad("per_flow: zipf needs zipf_s > 0 (e.g. zipf_s: 1.0)")
        if self.per_flow != "zipf" and self.zipf_s is not None:
            raise _bad(f"zipf_s is only for per_flow: zipf (per_flow is {self.per_flow})")
        if self.per_flow == "explicit" and self.weights is None:
            raise _bad("per_flow: explicit needs weights: [w0, w1, ...], one per flow")
        if self.per_flow != "explicit" and self.weights is not None:
            raise _bad(f"weights is only for per_flow: explicit (per_flow is {self.per_flow})")
        return self


class ArrivalSpec(_Strict):
    """Arrival process; the YAML may say just ``poisson`` or ``constant``."""

    process: Literal["poisson", "constant", "onoff"] = "poisson"
    on_s: Annotated[float | None, in_range(0, MAX_SECONDS, "s", _TIME_WHY)] = None
    off_s: Annotated[float | None, in_range(0, MAX_SECONDS, "s", _TIME_WHY)] = None
    within: Literal["poisson", "constant"] = "poisson"

    @model_validator(mode="before")
    @classmethod
    def _short(cls, data: object) -> object:
        if isinstance(data, str):
            if data not in ("poisson", "constant"):
                raise _bad(
                    f"{data!r} is not an arrival process; use poisson, constant or "
                    "{process: onoff, on_s: ..., off_s: ...}"
                )
            return {"process": data}
        return data

    @field_validator("on_s")
    @classmethod
    def _on(cls, v: float | None) -> float | None:
        if v is not None and (not math.isfinite(v) or v < 1e-9):
            raise _bad("must be >= 1e-9 s (time resolution is 1 ns)")
        return v

    @model_validator(mode="after")
    def _fields(self) -> ArrivalSpec:
        if self.process == "onoff":
            if self.on_s is None or self.off_s is None:
                raise _bad("process: onoff needs on_s and off_s (seconds), e.g. on_s: 0.001")
        elif self.on_s is not None or self.off_s is not None or self.within != "poisson":
            raise _bad(f"on_s, off_s and within are only for process: onoff, not {self.process}")
        return self

    @property
    def duty(self) -> float:
        """Fraction of time ON (1.0 unless onoff)."""
        if self.process != "onoff":
            return 1.0
        return self.on_s / (self.on_s + self.off_s)


class SizeSpec(_Strict):
    """Frame sizes incl. FCS; the YAML may give a single size."""

    choices: list[int]
    weights: list[float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _short(cls, data: object) -> object:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"choices": [data]}
        return data

    @field_validator("choices")
    @classmethod
    def _choices(cls, v: list[int]) -> list[int]:
        if not v:
            raise _bad("is empty; give at least one frame size, e.g. [64, 1518]")
        for s in v:
            if not MIN_FRAME <= s <= MAX_FRAME:
                raise _bad(f"frame size {s} is out of range; use {MIN_FRAME}..{MAX_FRAME} bytes")
        return v

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and (
            any(not math.isfinite(w) or w < 0 for w in v) or not any(w > 0 for w in v)
        ):
            raise _bad("needs finite weights >= 0, not all 0")
        return v

    @model_validator(mode="after")
    def _lengths(self) -> SizeSpec:
        if self.weights is not None and len(self.weights) != len(self.choices):
            raise _bad(
                f"weights has {len(self.weights)} entries but choices has {len(self.choices)};"
                " give one weight per size"
            )
        return self

    def probs(self) -> list[float]:
        w = self.weights or [1.0] * len(self.choices)
        return [x / sum(w) for x in w]

    @property
    def mean(self) -> float:
        return sum(c * p for c, p in zip(self.choices, self.probs(), strict=True))


class GroupSpec(_Strict):
    # Declared in dependency order: validators below read earlier fields via info.data.
    name: str
    spoofed: bool = False
    flows: int | None = Field(None, validate_default=True)
    proto: Literal["udp", "tcp"] = "udp"
    ip: Literal[4, 6] = 4
    src: AddrSpec | None = Field(None, validate_default=True)
    dst: AddrSpec
    sport: PortSpec = Field(default_factory=lambda: PortSpec(range=[1024, 65535]))
    dport: PortSpec
    rate: RateSpec
    arrivals: ArrivalSpec = Field(default_factory=ArrivalSpec)
    size: SizeSpec = Field(default_factory=lambda: SizeSpec(choices=[MIN_FRAME]))
    start: Annotated[float, in_range(0, MAX_SECONDS, "s", _TIME_WHY)] = 0.0
    stop: Annotated[float | None, in_range(0, MAX_SECONDS, "s", _TIME_WHY)] = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise _bad(f"{v!r} is not a valid name; use letters, digits, '_', '.', '-'")
        return v

    @field_validator("flows")
    @classmethod
    def _flows(cls, v: int | None, info: ValidationInfo) -> int:
        if v is None:
            if info.data.get("spoofed"):
                return SPOOFED_FLOWS
            raise _bad("is required: number of flows (>= 1); only spoofed groups default it")
        if v < 1:
            raise _bad(f"must be >= 1 (got {v})")
        if v > MAX_FLOWS:
            raise _bad(f"{v} is more flows than rxlab's int32 flow ids hold ({MAX_FLOWS})")
        return v

    @field_validator("src", "dst")
    @classmethod
    def _addr(cls, v: AddrSpec | None, info: ValidationInfo) -> AddrSpec:
        ip = info.data.get("ip")
        if v is None:
            if not info.data.get("spoofed"):
                raise _bad("is required: {addr: ...}, {cidr: ...} or {list: [...]}")
            v = AddrSpec(cidr="0.0.0.0/0" if ip != 6 else "::/0")
        if ip is not None and v.version() != {ip}:
            raise _bad(f"address family does not match ip: {ip}; use IPv{ip} addresses or fix ip")
        return v

    @field_validator("sport", "dport")
    @classmethod
    def _seq(cls, v: PortSpec, info: ValidationInfo) -> PortSpec:
        n = info.data.get("flows")
        if v.sequential is not None and n is not None and v.sequential + n - 1 > 65535:
            raise _bad(
                f"sequential base {v.sequential} + {n} flows passes 65535; "
                f"use a base <= {max(0, 65536 - n)} or a range"
            )
        return v

    @field_validator("rate")
    @classmethod
    def _rate(cls, v: RateSpec, info: ValidationInfo) -> RateSpec:
        n = info.data.get("flows")
        if v.weights is not None and n is not None and len(v.weights) != n:
            raise _bad(f"weights has {len(v.weights)} entries but flows is {n}; give one per flow")
        if info.data.get("spoofed") and v.per_flow != "constant":
            raise _bad("spoofed groups need per_flow: constant (each source is one random flow)")
        return v

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: float | None, info: ValidationInfo) -> float | None:
        start = info.data.get("start")
        if v is not None and start is not None and not v > start:
            raise _bad(f"must be > start ({start:g} s), or null for the scenario duration")
        return v

    @property
    def proto_num(self) -> int:
        return 6 if self.proto == "tcp" else 17


class PcapSpec(_Strict):
    """Replay a capture instead of generated groups (``rxlab run --pcap FILE``)."""

    file: str
    speedup: Annotated[float, in_range(1e-6, 1e6, "", "a replay at between a millionth and a "
                                     "million times the captured speed")] = 1.0
    allow_truncated: bool = False


class TrafficSpec(_Strict):
    """The ``traffic:`` mapping of a scenario: generated groups, or a capture."""

    groups: list[GroupSpec] = Field(default_factory=list)
    pcap: PcapSpec | None = None

    @model_validator(mode="after")
    def _one_source(self):
        if self.pcap is not None and self.groups:
            raise _bad("give either groups or pcap, not both")
        if self.pcap is None and not self.groups:
            raise _bad("no traffic: define groups (name, flows, dst, dport, rate) or pcap")
        return self

    def group_names(self) -> list[str]:
        return ["pcap"] if self.pcap is not None else [g.name for g in self.groups]

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: list[GroupSpec]) -> list[GroupSpec]:
        seen: dict[str, int] = {}
        for i, g in enumerate(v):
            if g.name in seen:
                raise _bad(
                    f"duplicate name {g.name!r} (groups[{seen[g.name]}] and groups[{i}]); "
                    "names must be unique"
                )
            seen[g.name] = i
        return v
