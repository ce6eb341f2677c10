"""Every command of the README's tour runs, as a user would type it, with short durations,
and its output fits 80 columns (COLUMNS=80, in a pipe).

The tour is read from README.md itself, so a command added there is tested here. Each
line is split at ';' and '&&' and run in order in one scratch folder (the tour's later
commands use files its earlier ones wrote). The only changes made to a command are the
ones that keep the suite short: a traffic duration for `run`, `--quick` for `reproduce`
and `bench`, one refresh for `top`, and the user's capture (`capture.pcap`) stood in for
by a small one. `my-host.yaml` is not stood in for: the tour makes it with `host export`
before it uses it, as a new user on a fresh clone would.
`rxlab kernel-check` and `rxlab calibrate` are not run here: they need root and the real
kernel, and tests/test_kcheck_kernel.py and tests/test_calibrate_kernel.py run them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COVERED_ELSEWHERE = {"kernel-check": "tests/test_kcheck_kernel.py runs the same checks",
                     "calibrate": "tests/test_calibrate_kernel.py runs a quick calibration"}


def tour_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## A short tour\s+```sh\n(.*?)```", text, re.S)
    assert block, "README.md has no '## A short tour' sh block"
    out = []
    for line in block.group(1).splitlines():
        line = line.split(" #", 1)[0].strip()
        for part in re.split(r";|&&", line):
            if part.strip():
                out.append(shlex.split(part))
    return out


def _pcap(path: Path) -> None:
    """Two UDP packets and one ARP record (libpcap format, microseconds)."""
    def udp(sport: int) -> bytes:
        ip = bytes([0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 192, 168, 0, 1])
        return bytes(12) + b"\x08\x00" + ip + struct.pack(">HHHH", sport, 9000, 26, 0) + bytes(18)

    def rec(us: int, data: bytes) -> bytes:
        return struct.pack("<IIII", 0, us, len(data), len(data)) + data

    arp = bytes(12) + b"\x08\x06" + bytes(28)
    path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
                     + rec(100, udp(1000)) + rec(500, arp) + rec(2100, udp(1001)))


def shortened(argv: list[str], tmp: Path) -> list[str]:
    """The tour's command with the suite's short durations and stand-in files."""
    assert argv[0] == "rxlab", argv
    args = [{"capture.pcap": str(tmp / "capture.pcap"),
             }.get(a, str(ROOT / a) if a.startswith("examples/") else a) for a in argv[1:]]
    cmd = args[0] if args else ""
    if cmd == "run" and "--pcap" not in args:
        args += ["--duration", "0.005"]
    elif cmd == "reproduce" and "--quick" not in args:
        args.append("--quick")
    elif cmd == "bench":
        args += ["--quick", "--skip-arfs"]
    elif cmd == "top":
        args += ["--count", "1", "--interval", "0.1"]
    elif cmd == "tune":
        args += ["--json"]
    elif cmd == "explain" and args[1:2] != ["arfs"] and "--duration" not in args:
        args += ["--duration", "0.005"]
    return [sys.executable, "-m", "rxlab.cli.main", *args]


WIDTH = 80  # COLUMNS=80 rxlab ... | awk 'length > 80' prints nothing


def assert_fits(cmd: str, out: str) -> None:
    """Every line within COLUMNS, counted in bytes as awk counts them (a pipe's tables
    are drawn in ASCII). --json is data, and --softnet is /proc/net/softnet_stat as the
    kernel prints it (134 columns for 15 fields): neither is wrapped."""
    long = [line for line in out.splitlines() if len(line.encode()) > WIDTH]
    assert not long, f"{cmd}: {len(long)} line(s) over {WIDTH} columns:\n" + "\n".join(long[:5])


def test_every_tour_command_runs(tmp_path):
    _pcap(tmp_path / "capture.pcap")
    cmds = tour_commands()
    assert len(cmds) >= 20  # the parser found the tour
    ran = []
    for argv in cmds:
        if len(argv) > 1 and argv[1] in COVERED_ELSEWHERE:
            continue
        full = shortened(argv, tmp_path)
        p = subprocess.run(full, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "COLUMNS": str(WIDTH)})
        assert p.returncode == 0, f"{shlex.join(argv)} -> exit {p.returncode}\n{p.stderr[-2000:]}"
        if "--json" in full:
            json.loads(p.stdout)
        elif "--softnet" not in full:
            assert_fits(shlex.join(argv), p.stdout)
        ran.append(shlex.join(argv))
    assert (tmp_path / "r.html").is_file() and (tmp_path / "host.yaml").is_file()
    print(f"\nREADME tour: {len(ran)} commands ran, kernel-check covered elsewhere")


@pytest.mark.parametrize("name", sorted(COVERED_ELSEWHERE))
def test_commands_covered_elsewhere_are_in_the_tour(name):
    assert any(len(a) > 1 and a[1] == name for a in tour_commands())


def test_the_tour_makes_my_host_yaml_before_it_reads_it():
    """A fresh clone has no my-host.yaml: the first command naming it must write it."""
    first = next(a for a in tour_commands() if "my-host.yaml" in a)
    assert first[1:3] == ["host", "export"] and "-o" in first, shlex.join(first)
