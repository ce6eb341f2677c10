"""CPU lists and masks read as the kernel reads them.

The vectors are the kernel's own self-test (lib/test_bitmap.c, ``parselist_tests`` and
``parse_tests``, Linux 5.x-6.x); the round trips are properties over random CPU sets.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rxlab.cpuset import (
    MAX_CPUS,
    CpuSetError,
    cpu_set,
    format_cpulist,
    format_mask,
    mask_text,
    mask_value,
    parse_cpulist,
    parse_mask,
)


def bits(value: int) -> list[int]:
    return [i for i in range(value.bit_length()) if value >> i & 1]


# lib/test_bitmap.c parselist_tests: input -> expected bitmap (exp1[...] values)
PARSELIST_OK = [
    ("0", 0x1),
    ("1", 0x2),
    ("0-15", 0x0000FFFF),
    ("16-31", 0xFFFF0000),
    ("0-31:1/2", 0x55555555),
    ("1-31:1/2", 0xAAAAAAAA),
    ("0-31:1/4", 0x11111111),
    ("1-31:1/4", 0x22222222),
    ("0-31:4/4", 0xFFFFFFFF),
    ("1-31:4/4", 0xFFFFFFFE),
    ("0-31:1/4,32-63:2/4", 0x3333333311111111),
    ("0-31:3/4,32-63:4/4", 0xFFFFFFFF77777777),
    ("  ,,  0-31:3/4  ,, 32-63:4/4  ,,  ", 0xFFFFFFFF77777777),
    ("0-31:1/4,32-63:2/4,64-95:3/4,96-127:4/4",
     0xFFFFFFFF_77777777_33333333_11111111),
    ("", 0),
    (",,  ,,  , ,  ,", 0),
    ("0-0", 0x1),
    ("1-1:1/1", 0x2),
    ("0-15:16/31", 0x0000FFFF),
    ("15-15:1/2", 0x8000),
    ("15-31:1/31", 0x8000),
    ("16-31:16/31", 0xFFFF0000),
    ("31-31:31/31", 0x80000000),
    ("0-31:1/3,1-31:1/3,2-31:1/3", 0xFFFFFFFF),
    ("1-10:8/12,8-31:24/29,0-31:0/3", 0xFFFFFFFE),
]

# the same table's -EINVAL / -EOVERFLOW inputs
PARSELIST_BAD = ["-1", "-0", "10-1", "0-31:", "0-31:0", "0-31:0/", "0-31:0/0", "0-31:1/0",
                 "0-31:10/1", "0-98765432123456789:10/1", "a-31", "0-a1", "a-31:10/1",
                 "0-31:a/1"]


@pytest.mark.parametrize("text, expected", PARSELIST_OK)
def test_cpulist_kernel_vectors(text, expected):
    assert parse_cpulist(text) == bits(expected)


@pytest.mark.parametrize("text", PARSELIST_BAD)
def test_cpulist_kernel_refusals(text):
    with pytest.raises(CpuSetError):
        parse_cpulist(text)


def test_cpulist_reversed_range_names_the_fix():
    with pytest.raises(CpuSetError, match="backwards.*write 1-3"):
        parse_cpulist("3-1")


def test_cpulist_ascii_digits_only_and_bounded_before_expanding():
    for text in ("²", "٣", "0-4294967295", f"{MAX_CPUS}"):
        with pytest.raises(CpuSetError):
            parse_cpulist(text)


# lib/test_bitmap.c parse_tests (bitmap_parse: comma-separated 32-bit hex words)
PARSE_OK = [
    ("0", 0),
    ("1", 1),
    ("deadbeef", 0xDEADBEEF),
    ("1,0", 0x1_00000000),
    ("deadbeef,1,0", 0xDEADBEEF_00000001_00000000),
    ("baadf00d,deadbeef,1,0", 0xBAADF00D_DEADBEEF_00000001_00000000),
    ("badf00d,deadbeef,1,0", 0x0BADF00D_DEADBEEF_00000001_00000000),
    ("  badf00d,deadbeef,1,0  ", 0x0BADF00D_DEADBEEF_00000001_00000000),
    (" , badf00d,deadbeef,1,0 , ", 0x0BADF00D_DEADBEEF_00000001_00000000),
    (" , badf00d, ,, ,,deadbeef,1,0 , ", 0x0BADF00D_DEADBEEF_00000001_00000000),
]


@pytest.mark.parametrize("text, expected", PARSE_OK)
def test_mask_kernel_vectors(text, expected):
    assert mask_value(text) == expected
    assert parse_mask(text) == bits(expected)


@pytest.mark.parametrize("text", ["goodfood,deadbeef,1,0", "123badf00d,deadbeef,1,0"])
def test_mask_kernel_refusals(text):  # -EINVAL (not hex), -EOVERFLOW (9 digits in a word)
    with pytest.raises(CpuSetError):
        mask_value(text)


def test_mask_forms_rxlab_adds_and_refuses():
    assert parse_mask("0xffff") == list(range(16))  # 0x: sysfs refuses it, rxlab allows it
    assert parse_mask("ff,ffffffff") == list(range(40))  # as sysfs prints 40 CPUs
    with pytest.raises(CpuSetError, match="write"):  # the kernel reads "" as 0; say "0"
        mask_value("")
    with pytest.raises(CpuSetError):
        mask_value("zz")


def test_mask_text_of_python_ints_and_yaml_numbers():
    from rxlab.inputs import YamlInt

    assert mask_text(0xFFFF) == "ffff"  # a Python int is the mask's value
    assert mask_text(YamlInt(10, "10")) == "10"  # YAML `rps_cpus: 10` is the text "10"
    assert parse_mask(mask_text(YamlInt(10, "10"))) == [4]
    assert mask_text(1 << 40) == "100,00000000"
    with pytest.raises(CpuSetError):
        mask_text(True)


cpu_sets = st.sets(st.integers(0, 300), max_size=40)


@given(cpu_sets)
def test_cpulist_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == sorted(cpus)


@given(cpu_sets)
def test_mask_round_trip(cpus):
    text = format_mask(cpus)
    assert parse_mask(text) == sorted(cpus)
    assert all(len(w) <= 8 for w in text.split(","))  # 32-bit words, as sysfs prints
    assert parse_mask("0x" + text) == sorted(cpus)


@given(cpu_sets)
def test_list_cpulist_and_mask_agree(cpus):
    assert cpu_set(sorted(cpus)) == cpu_set(format_cpulist(cpus)) == parse_mask(
        format_mask(cpus))


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60), st.integers(1, 9),
                          st.integers(1, 9)), max_size=6))
def test_strided_groups_match_their_definition(regions):
    """START-END:USED/GROUP sets USED of every GROUP CPUs from START, up to END
    (bitmap_set_region in lib/bitmap.c)."""
    parts, want = [], set()
    for start, span, used, group in regions:
        used = min(used, group)
        end = start + span
        parts.append(f"{start}-{end}:{used}/{group}")
        want |= {c for c in range(start, end + 1) if (c - start) % group < used}
    assert parse_cpulist(",".join(parts)) == sorted(want)
