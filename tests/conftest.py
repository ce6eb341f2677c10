"""Shared builders for scenario dicts (handed to ``rxlab.scenario.scenario_from_dict``).

They are exposed as fixtures (``udp_group``, ``scenario_dict``) so test modules do not
import from conftest. Simulation results are computed in module-scoped fixtures of the
modules themselves: the first ``simulate()`` of a process pays the numba compile (or
cache load), every later one is fast.

The tiers (markers registered in pyproject.toml; ``pytest -m "not slow"`` is the quick
tier, ``-m "not root"`` what runs without root): ``TIERS`` names them per module, and a
test that uses a veth lab (the ``lab`` fixture) is ``root`` and ``kernel`` wherever it is.
A test that needs a kernel feature skips with the cause when the kernel lacks it
(``rxlab.host.caps``), so the tiers say what a test needs, not whether it passes here.
"""

from __future__ import annotations

import pytest
from support.rfs_harness import merge  # the one deep merge of scenario dicts


def make_udp_group(
    name: str = "g",
    flows: int = 1,
    pps: float = 10_000,
    *,
    arrivals: str | dict = "poisson",
    src: dict | None = None,
    sport: dict | None = None,
    size: int = 64,
    **extra,
) -> dict:
    """One UDP traffic group to 192.168.0.1:9000 (64-byte frames, Poisson by default)."""
    g = {
        "name": name,
        "flows": flows,
        "proto": "udp",
        "src": src or ({"addr": "10.0.0.2"} if flows == 1 else {"cidr": "10.0.0.0/8"}),
        "dst": {"addr": "192.168.0.1"},
        "sport": sport or ({"value": 1234} if flows == 1 else {"range": [1024, 65535]}),
        "dport": {"value": 9000},
        "rate": {"pps": pps},
        "arrivals": arrivals,
        "size": size,
    }
    g.update(extra)
    return g


def make_scenario_dict(groups: list[dict], **sections) -> dict:
    """A scenario dict: small host, one fast sink app on the last CPU; ``sections``
    are deep-merged over the defaults (``apps`` replaces the app list)."""
    cpus = sections.get("host", {}).get("cpus", 2)
    base = {
        "name": "test",
        "seed": 1,
        "duration": 0.02,
        "drain": 0.01,
        "host": {"cpus": cpus},
        "nic": {"queues": 1, "irq_affinity": [0], "ring_size": 1024, "link_gbps": 100},
        "kernel": {},
        "traffic": {"groups": groups},
        "apps": [
            {
                "name": "sink",
                "cpus": cpus - 1,
                "cost": {"user_ns": 0, "syscall_ns": 0},
                "rcvbuf": 64 << 20,
                "batch": 1024,
            }
        ],
    }
    return merge(base, sections)


ROOT_KERNEL = ("root", "kernel")
TIERS: dict[str, tuple[str, ...]] = {
    # the real kernel in network namespaces, as root
    "test_host_signals": (*ROOT_KERNEL, "slow"),
    "test_host_netns_marks": ROOT_KERNEL,
    "test_kcheck_kernel": (*ROOT_KERNEL, "slow"),
    "test_calibrate_kernel": (*ROOT_KERNEL, "slow"),
    # hostile inputs and drawn cases
    "test_fuzz_cli": ("fuzz", "slow"),
    "test_hostile_inputs": ("fuzz", "slow"),
    "test_capture_hostile": ("fuzz",),
    # whole commands over many runs
    "test_readme_tour": ("slow",),
    "test_repro": ("slow",),
    "test_repro_claims": ("slow",),
    "test_bench": ("slow",),
    "test_bench_jobs": ("slow",),
    "test_sweep_dask": ("slow",),
    "test_screenshot": ("slow",),
}


def pytest_collection_modifyitems(items):
    for item in items:
        name = item.module.__name__.rpartition(".")[2] if item.module else ""
        marks = set(TIERS.get(name, ()))
        if "lab" in getattr(item, "fixturenames", ()):
            marks.update(ROOT_KERNEL)
        for m in sorted(marks):
            item.add_marker(m)


@pytest.fixture(scope="session")
def udp_group():
    return make_udp_group


@pytest.fixture(scope="session")
def scenario_dict():
    return make_scenario_dict
