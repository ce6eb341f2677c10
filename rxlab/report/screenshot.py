"""An HTML page rendered to PNG by headless Chromium (Debian's ``chromium`` package).

Chromium runs with a throw-away profile folder and everything that would reach the
network or the desktop off (no sandbox: CI runs as root, where Chromium refuses to start
with it). The page must be self-contained (the reports here are: CSS and plots inline).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from rxlab.errors import UsageError

NAMES = ("chromium", "chromium-browser")
WINDOW = (1280, 1600)
TIMEOUT_S = 120


def find_chromium() -> str:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise UsageError("--screenshot: no chromium on PATH; install Debian's chromium "
                     "(sudo scripts/setup-system.sh, or apt-get install chromium)")


def render(html: str | Path, png: str | Path, window: tuple[int, int] = WINDOW) -> Path:
    """Render the HTML file ``html`` to ``png`` (the top ``window`` pixels of the page)."""
    exe = find_chromium()
    src, dest = Path(html).resolve(), Path(png).resolve()
    if not src.is_file():
        raise UsageError(f"{html}: no such HTML file")
    dest.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rxlab-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--screenshot={dest}",
               f"--window-size={window[0]},{window[1]}", src.as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UsageError(f"--screenshot: chromium did not finish {src.name} within "
                             f"{TIMEOUT_S} s") from None
    if proc.returncode != 0 or not dest.is_file():
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        why = lines[-1][:200] if lines else f"exit status {proc.returncode}"
        raise UsageError(f"--screenshot: chromium wrote no {dest.name} ({why})")
    return dest
