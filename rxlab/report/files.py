"""``--out DIR``: result JSON, time series CSV, softnet_stat dump and plots, and the
scenario the result came from (``scenario.yaml``: ``rxlab run DIR/scenario.yaml`` gives the
same result, bit for bit, with the same rxlab; ``rxlab explain`` re-runs it for the flow
table a result does not carry).

Written into a temporary sibling folder and renamed at the end, so an error never
leaves a half-written output folder behind.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.report import plots


def check_out_dir(out: str | Path, flag: str = "--out") -> Path:
    """Refuse, before any work, an output folder that cannot be made: its first existing
    ancestor must be a writable folder (a file, /proc or a read-only mount is not)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{flag}: {out} exists and is not a folder; give a folder path")
    anc = out.absolute()
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir():
        raise UsageError(f"{flag}: {out} cannot be made: {anc} is a file; give a folder path")
    if not os.access(anc, os.W_OK | os.X_OK) or anc.is_relative_to("/proc") or (
            anc.is_relative_to("/sys")):
        raise UsageError(f"{flag}: {out} cannot be made: {anc} is not writable; give a "
                         "writable folder")
    return out


def make_out_dir(out: str | Path, flag: str = "--out") -> Path:
    out = check_out_dir(out, flag)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{flag}: cannot make {out} ({err.strerror}); give a writable "
                         "folder") from None
    return out


SCENARIO_FILE = "scenario.yaml"


def scenario_yaml(sc) -> str:
    """The scenario as YAML that ``load_scenario`` reads back to the same scenario: every
    field, defaults included, and a capture file's path made absolute."""
    import yaml

    data = sc.model_dump(mode="json", by_alias=True, exclude_none=True)
    pcap = data.get("traffic", {}).get("pcap")
    if isinstance(pcap, dict) and pcap.get("file"):
        pcap["file"] = str(Path(pcap["file"]).resolve())
    head = ("# The scenario of result.json beside it, every field resolved: `rxlab run` on\n"
            "# this file gives the same result with the same rxlab.\n")
    return head + yaml.safe_dump(data, sort_keys=False)


def write_out(result, out: str | Path, scenario=None) -> Path:
    out = check_out_dir(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as err:
        raise UsageError(f"--out: cannot make {out} ({err.strerror}); give a writable "
                         "folder") from None
    try:
        d, s = result.data, result.series
        (tmp / "result.json").write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
        (tmp / "softnet_stat").write_text(result.softnet_stat)
        if scenario is not None:
            (tmp / SCENARIO_FILE).write_text(scenario_yaml(scenario))
        ncpu = len(d["cpus"])
        with open(tmp / "series.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "offered_pps", "delivered_pps", "dropped_pps", "processed_pps"]
                       + [f"cpu{c}_busy" for c in range(ncpu)]
                       + [f"cpu{c}_softirq" for c in range(ncpu)])
            for i, t in enumerate(s["t_s"]):
                w.writerow([f"{t:.6f}", s["offered_pps"][i], s["delivered_pps"][i],
                            s["dropped_pps"][i], s["processed_pps"][i]]
                           + [f"{x:.6f}" for x in s["cpu_busy"][i]]
                           + [f"{x:.6f}" for x in s["cpu_softirq"][i]])
        plots.plot_cpu_load(d, tmp / "cpu_load.png")
        plots.plot_latency_cdf(s, tmp / "latency_cdf.png")
        plots.plot_throughput(s, tmp / "throughput.png")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
