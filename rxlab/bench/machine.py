"""What the benchmark ran on: CPU model, cores, kernel, Python and library versions."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from importlib import metadata


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _gcc() -> str | None:
    cc = shutil.which("gcc")
    if not cc:
        return None
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def machine() -> dict:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        load = None
    return {
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "load_avg": load,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "numba": _version("numba"),
        "simpy": _version("simpy"),
        "gcc": _gcc(),
    }
