"""``--out DIR``: result JSON, time series CSV, softnet_stat dump and plots, and the
scenario the result came from (``scenario.yaml``: ``rxlab run DIR/scenario.yaml`` gives the
same result, bit for bit, with the same rxlab; ``rxlab explain`` re-runs it for the flow
table a result does not carry).

Written into a temporary folder beside DIR and moved into it file by file
(``rxlab.outfiles``), so an error never leaves a half-written file behind and only
rxlab's own files in DIR are ever replaced.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rxlab import outfiles
from rxlab.report import plots

RUN_FILES = ("result.json", "softnet_stat", "scenario.yaml", "series.csv", "cpu_load.png",
             "latency_cdf.png", "throughput.png")  # what write_out puts in DIR


def check_out_dir(out: str | Path, flag: str = "--out", force: bool = False,
                  names: tuple[str, ...] = RUN_FILES) -> Path:
    """Refuse, before any work, an output folder rxlab must not write (rxlab.outfiles),
    or whose files of the user's are named like the ones it will write."""
    return outfiles.check_dir(out, flag, force, names=names)


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


def write_out(result, out: str | Path, scenario=None, force: bool = False) -> Path:
    with outfiles.OutDir(out, force=force) as tmp:
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
    return Path(out)
