"""CPU sets written the kernel's way: cpulists and hex masks.

A cpulist is what ``bitmap_parselist()`` (lib/bitmap.c) reads and /sys prints in
``*_list`` files: decimal CPUs and ranges separated by commas (``0-7,9``), each range
optionally strided as ``START-END:USED/GROUP`` (``0-15:2/4`` is 0,1,4,5,8,9,12,13).
A reversed range (``3-1``), a group of 0 or USED > GROUP is ``-EINVAL`` there and an
error here.

A mask is what ``bitmap_parse()`` (lib/bitmap.c) reads and sysfs prints in files such as
``rps_cpus``: hex digits, bit N = CPU N, grouped by commas into 32-bit words of at most
8 digits each (``ff,ffffffff`` on a 40-CPU host); ``0`` is the empty set. The kernel
takes no ``0x``; rxlab allows it.

Every CPU number is below ``MAX_CPUS`` (x86's largest NR_CPUS, arch/x86/Kconfig), so a
range such as ``0-4000000000`` is refused before it is expanded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_CPUS = 8192  # NR_CPUS maximum on x86_64 (CONFIG_MAXSMP, arch/x86/Kconfig)

CPULIST_FORMS = "a cpulist such as '0-7,9' or '0-15:2/4', or a list such as [0, 1]"
MASK_FORMS = ("a hex CPU mask as sysfs prints it, e.g. 'f', '0x3', 'ff,ffffffff' "
              "(32-bit words, 8 hex digits at most), or '0' for none")

_REGION = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+)/([0-9]+))?)?")  # ASCII, base 10
_SEP = re.compile(r"[, \t\n\v\f\r]+")  # commas and the kernel's isspace()


class CpuSetError(ValueError):
    """A CPU list or mask the kernel would refuse; the message says why."""


def _num(text: str) -> int:
    n = int(text)
    if n >= MAX_CPUS:
        raise CpuSetError(f"CPU {n} is beyond any kernel's NR_CPUS ({MAX_CPUS})")
    return n


def parse_cpulist(text: str) -> list[int]:
    """``'0-3,8'`` -> ``[0, 1, 2, 3, 8]`` the way bitmap_parselist() reads it."""
    out: set[int] = set()
    for region in _SEP.split(str(text).strip()):
        if not region:
            continue
        m = _REGION.fullmatch(region)
        if not m:
            raise CpuSetError(f"{region!r} is not a CPU or a range; write {CPULIST_FORMS}")
        start = _num(m.group(1))
        end = _num(m.group(2)) if m.group(2) is not None else start
        used = int(m.group(3)) if m.group(3) is not None else end + 1
        group = int(m.group(4)) if m.group(4) is not None else end + 1
        if start > end:
            raise CpuSetError(f"range {region!r} runs backwards (bitmap_parselist: -EINVAL); "
                              f"write {end}-{start}")
        if group == 0 or used > group:
            raise CpuSetError(f"{region!r}: a stride START-END:USED/GROUP needs "
                              "0 < GROUP and USED <= GROUP (bitmap_parselist: -EINVAL)")
        for base in range(start, end + 1, group):
            out.update(range(base, min(end + 1, base + used)))
    return sorted(out)


def format_cpulist(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``'0-3,8'`` (as /sys prints a *_list file; '' when empty)."""
    parts: list[str] = []
    run: list[int] = []
    for c in sorted(set(int(c) for c in cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def mask_value(text: str) -> int:
    """``'ff,ffffffff'`` -> its integer value, the way bitmap_parse() reads it."""
    s = str(text).strip().lower()
    s = s[2:] if s.startswith("0x") else s
    words = [w for w in _SEP.split(s) if w]
    if not words:
        raise CpuSetError(f"{text!r} is empty; write {MASK_FORMS}")
    if len(words) * 32 > MAX_CPUS:
        raise CpuSetError(f"{text!r} has {len(words)} 32-bit words, more than NR_CPUS "
                          f"({MAX_CPUS}) bits")
    value = 0
    for w in words:
        if not re.fullmatch(r"[0-9a-f]+", w):
            raise CpuSetError(f"{text!r} is not hex; write {MASK_FORMS}")
        if len(w) > 8 and len(words) > 1:
            raise CpuSetError(f"{text!r}: the word {w!r} has more than 8 hex digits "
                              "(bitmap_parse: -EOVERFLOW); put a comma every 8 digits")
        if len(w) > MAX_CPUS // 4:
            raise CpuSetError(f"{text!r} names CPUs beyond NR_CPUS ({MAX_CPUS})")
        value = (value << (32 if len(words) > 1 else 4 * len(w))) | int(w, 16)
    if value.bit_length() > MAX_CPUS:
        raise CpuSetError(f"{text!r} names CPUs beyond NR_CPUS ({MAX_CPUS})")
    return value


def parse_mask(text: str) -> list[int]:
    """``'ff,ffffffff'`` -> ``[0, ..., 39]``; ``'0'`` -> ``[]``."""
    value = mask_value(text)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def format_mask(cpus: Iterable[int]) -> str:
    """CPUs -> the mask as sysfs prints it: 32-bit words, commas between, '0' when empty."""
    value = 0
    for c in cpus:
        value |= 1 << int(c)
    return _words(value)


def normal_mask(text: str) -> str:
    """A mask in the one form rxlab writes to the kernel (``'1,0'`` -> ``'1,00000000'``,
    CPU 32, as bitmap_parse() reads both); raises CpuSetError as ``mask_value``."""
    return _words(mask_value(text))


def same_mask(a: str, b: str) -> bool:
    """Two masks name the same CPUs, read as bitmap_parse() reads them."""
    return mask_value(a) == mask_value(b)


def _words(value: int) -> str:
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    return ",".join([f"{words[-1]:x}"] + [f"{w:08x}" for w in reversed(words[:-1])])


def mask_text(value: object) -> str:
    """A mask from a scenario: text as written (a YAML number keeps its source text, so
    ``rps_cpus: 10`` is the sysfs text "10", CPU 4), or a Python int as the mask's value."""
    text = getattr(value, "yaml_text", None)
    if text is None:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise CpuSetError(f"{value!r} is not a CPU mask; write {MASK_FORMS}")
        if isinstance(value, int):
            if value < 0:
                raise CpuSetError(f"{value} is negative; write {MASK_FORMS}")
            text = _words(value)
        else:
            text = value
    text = str(text).strip()
    mask_value(text)  # raises with the reason
    return text


def cpu_set(value: object) -> list[int]:
    """A CPU set from a scenario: a cpulist string, one CPU number, or a list of them."""
    text = getattr(value, "yaml_text", None)
    if text is not None:
        return parse_cpulist(text)
    if isinstance(value, str):
        return parse_cpulist(value)
    if isinstance(value, (list, tuple)):
        out = set()
        for c in value:
            if isinstance(c, bool) or not isinstance(c, int):
                raise CpuSetError(f"{c!r} in {list(value)!r} is not a CPU number; write "
                                  f"{CPULIST_FORMS}")
            if c < 0:
                raise CpuSetError(f"CPU {c} is negative")
            out.add(_num(str(int(c))))
        return sorted(out)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise CpuSetError(f"CPU {value} is negative")
        return [_num(str(value))]
    raise CpuSetError(f"{value!r} is not a CPU set; write {CPULIST_FORMS}")
