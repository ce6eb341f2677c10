"""The comparison page and a sweep report rendered to PNG by headless Chromium (Debian's
chromium, installed by scripts/setup-system.sh): the right size, not blank, and the
tables drawn (their 1-pixel #ddd row borders counted in the image)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml

from rxlab.cli.main import main
from rxlab.report.screenshot import WINDOW, render

pytestmark = pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="chromium is not installed (scripts/setup-system.sh installs Debian's chromium "
           "as root; apt-get install chromium)")

BORDER = np.array([0xdd, 0xdd, 0xdd]) / 255  # td/th border colour of both pages' CSS


def _image(path):
    from matplotlib.image import imread

    img = imread(path)[..., :3]
    assert img.shape[:2] == (WINDOW[1], WINDOW[0])  # height, width
    assert img.std() > 0.05  # not a blank page
    return img


def _border_rows(img, min_run: int = 200) -> list[int]:
    """Pixel rows holding a horizontal table border at least ``min_run`` pixels long."""
    hit = np.all(np.abs(img - BORDER) < 0.02, axis=2)
    rows = []
    for y in range(hit.shape[0]):
        run = best = 0
        for v in hit[y]:
            run = run + 1 if v else 0
            best = max(best, run)
        if best >= min_run:
            rows.append(y)
    return rows


def test_compare_page_screenshot(tmp_path):
    out = tmp_path / "c"
    assert main(["compare", "default", "--set-variant", "rps:kernel.rps_cpus=f",
                 "--set-variant", "backlog-100:kernel.netdev_max_backlog=100",
                 "--duration", "0.005", "--seeds", "3", "--jobs", "2",
                 "--out", str(out), "--screenshot"]) == 0
    img = _image(out / "comparison-page.png")
    import json

    cmp = json.loads((out / "comparison.json").read_text())
    rows = _border_rows(img)
    # the comparison table: a border above and below each metric row (and the header)
    assert len(rows) >= len(cmp["metrics"]) + 2, rows
    # a significant difference is drawn bold in its colour (RPS moves the latency)
    assert any(d["significant"] for m in cmp["metrics"] for d in m["diff"].values())
    sig = np.array([0xd5, 0x5e, 0x00]) / 255
    assert np.all(np.abs(img - sig) < 0.06, axis=2).sum() > 50
    # the embedded plot: its orange and blue markers below the table
    top_of_plot = max(rows)
    assert np.all(np.abs(img[top_of_plot:] - sig) < 0.06, axis=2).sum() > 20


def test_sweep_report_screenshot(tmp_path):
    sweep = {"name": "shot", "base": "default", "duration": 0.005,
             "grid": {"nic.queues": [1, 4]}, "replications": 2}
    f = tmp_path / "shot.yaml"
    f.write_text(yaml.safe_dump(sweep))
    out = tmp_path / "sw"
    assert main(["sweep", str(f), "--jobs", "2", "--out", str(out), "-q"]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    png = render(tmp_path / "r.html", tmp_path / "r.png")
    img = _image(png)
    # overview table (9 rows) and the summary table (header + 2 points)
    assert len(_border_rows(img)) >= 12
