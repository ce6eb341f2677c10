"""What a real-kernel test looks for after a run: traffic processes left behind."""

from __future__ import annotations

import os


def traffic_processes() -> list[int]:
    """Pids of running kcheck traffic senders and receivers (``kcheck/traffic.py``)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"kcheck/traffic.py" in fh.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out
