"""PNG plots for --out: per-CPU load, latency CDF, throughput and drops over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rxlab.kernel.accounting import hist_value


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_cpu_load(d: dict, path: Path) -> None:
    plt = _plt()
    cats = ("softirq", "irq", "system", "user")
    cpus = [c["cpu"] for c in d["cpus"]]
    fig, ax = plt.subplots(figsize=(max(4, 0.5 * len(cpus) + 2), 3.5))
    bottom = np.zeros(len(cpus))
    for cat in cats:
        v = np.array([c["util"][cat] for c in d["cpus"]])
        ax.bar(cpus, v, bottom=bottom, label=cat)
        bottom += v
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("CPU")
    ax.set_ylabel("fraction of time")
    ax.set_title("Per-CPU load")
    # below the axes: inside, it covers the bars of a saturated CPU
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.18),
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency_cdf(series: dict, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key, label in (("latency_hist_socket", "wire -> socket"),
                       ("latency_hist_app", "wire -> application")):
        h = np.asarray(series[key])
        if h.sum() == 0:
            continue
        x = hist_value(np.arange(h.size)) / 1e3
        nz = h > 0
        ax.plot(x[nz], np.cumsum(h)[nz] / h.sum(), label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency (us)")
    ax.set_ylabel("CDF")
    ax.set_title("Latency")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_throughput(series: dict, path: Path) -> None:
    plt = _plt()
    t = np.asarray(series["t_s"])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    # offered dashed and on top: when nothing drops, delivered lies on it and hid it
    style = {"offered_pps": {"linestyle": "--", "linewidth": 2.0, "zorder": 3},
             "delivered_pps": {"linewidth": 1.2, "zorder": 2},
             "dropped_pps": {"linewidth": 1.2, "zorder": 2}}
    for key in ("offered_pps", "delivered_pps", "dropped_pps"):
        ax.plot(t, np.asarray(series[key]) / 1e3, label=key.replace("_pps", ""), **style[key])
    ax.set_xlabel("time (s)")
    ax.set_ylabel("kpps")
    ax.set_title("Throughput and drops")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
