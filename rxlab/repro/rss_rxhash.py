"""Seed 001: mvpp2 rxhash off vs on (Matteo Croce, netdev, 19-20 May 2020).

A 4-CPU host with a 4-queue Marvell PPv2 gigabit port receives 64-byte UDP frames of
many flows (random addresses, port 0 -> 0, no listener: UdpNoPorts). With rxhash off
the driver disables RSS and every packet lands on queue 0: one CPU saturates in softirq
(ksoftirqd/0 at 99.7 %) and receives ~826 kpps. With rxhash on the load spreads and the
port receives ~955 kpps, "maybe an HW limit of the gigabit port".

Calibrations (docs/model.md): the mvpp2-a72 cost profile is scaled so that one CPU
saturates at the rxhash-off rate, and the port's packet-rate ceiling ``nic.max_pps`` is
the mean rxhash-on rate of the seed. What the model then predicts by itself: which CPU
saturates, that it runs in ksoftirqd, how load spreads with rxhash on, ring drops versus
NIC drops, and the per-CPU utilisation.
"""

from __future__ import annotations

from rxlab.report.topview import summary_line, top_view
from rxlab.repro.base import claim, fig, make

NAME = "rss-rxhash"
TITLE = "Seed 001: mvpp2 rxhash off vs on (4 CPUs, 4 queues, 1G, 64-byte UDP flood)"
SEED = "001_893c9eb99a7ad808.txt"
TABLE = ["rx_pps", "rx_mbps", "offered_pps", "cpu0_softirq", "max_cpu_busy",
         "ksoftirqd_cpu_sum", "global_cpu_busy", "top_si_pct", "top_idle_pct",
         "ksoftirqd_rows_pct", "ksoftirqd_rows_pct_of_machine", "ring_full", "nic_overrun"]

SEED_RX_ON_KPPS = (950.8, 955.0, 953.3, 962.9)  # utraf samples, rxhash on
LINE_RATE_1G_64B = 1_488_095  # pps: 1e9 / ((64 + 20) * 8): preamble + SFD + gap = 20 B


def scenario(rxhash: bool, duration: float, kernel: str) -> dict:
    return {
        "name": f"rss-rxhash-{'on' if rxhash else 'off'}",
        "seed": 1,
        "duration": duration,
        "drain": 0.01,
        "host": {"cpus": 4, "kernel": kernel, "cost_profile": "mvpp2-a72"},
        "nic": {
            "driver": "mvpp2",
            "queues": 4,
            "ring_size": 1024,
            "link_gbps": 1.0,
            "max_pps": sum(SEED_RX_ON_KPPS) / len(SEED_RX_ON_KPPS) * 1000,
            "rxhash": rxhash,
            "rss": {"flow_hash": {"udp4": "sdfn"}},
        },
        "traffic": {"groups": [{
            "name": "flood", "flows": 4096, "proto": "udp",
            "src": {"cidr": "10.0.0.0/8"}, "dst": {"cidr": "192.168.0.0/16"},
            "sport": {"value": 0}, "dport": {"value": 0},
            "rate": {"pps": LINE_RATE_1G_64B, "per_flow": "constant"},
            "arrivals": "constant", "size": 64,
        }]},
    }


def cases(quick: bool, kernel: str | None):
    dur = 0.05 if quick else 0.5
    k = kernel or "5.7"  # net-next of May 2020
    return [
        ("rxhash-off", {"rxhash": False, "kernel": k}, make(scenario(False, dur, k), NAME)),
        ("rxhash-on", {"rxhash": True, "kernel": k}, make(scenario(True, dur, k), NAME)),
    ]


def metrics(name: str, res) -> dict:
    d = res.data
    dur = d["duration_s"]
    cpus = d["cpus"]
    rx = sum(c["softnet_stat"]["processed"] for c in cpus) / dur
    busy = [1 - c["util"]["idle"] for c in cpus]
    top = top_view(d)
    return {
        "rx_pps": round(rx, 1),
        "rx_mbps": round(rx * 60 * 8 / 1e6, 2),  # utraf counts 60-byte frames (no FCS)
        "offered_pps": d["throughput"]["offered_pps"],
        "cpu0_softirq": cpus[0]["util"]["softirq"],
        "max_cpu_busy": round(max(busy), 4),
        "ksoftirqd_cpu_sum": round(sum(c["util"]["ksoftirqd"] for c in cpus), 4),
        "global_cpu_busy": round(sum(busy) / len(busy), 4),
        "ring_full": d["packets"]["dropped_by_reason"]["ring_full"],
        "nic_overrun": d["packets"]["dropped_by_reason"]["nic_overrun"],
        # what the poster's top showed: the summary line from /proc/stat and the ksoftirqd
        # rows (rxlab.report.topview has the kernel's accounting)
        "top_si_pct": top["summary"]["si"],
        "top_idle_pct": top["summary"]["id"],
        "ksoftirqd_rows_pct": top["ksoftirqd_pct_sum"],
        "ksoftirqd_rows_pct_of_machine": round(top["ksoftirqd_pct_sum"] / len(cpus), 2),
        "top": top,
    }


CALIBRATED_OFF = ("mvpp2-a72 cost profile: every stage scaled so one CPU saturates at "
                  "826.5 kpps, this rxhash-off rate")
CALIBRATED_ON = ("nic.max_pps: the port's packet-rate ceiling set to the seed's mean "
                 "rxhash-on rate, 955.5 kpps; the profile scaled to the rxhash-off rate")


def claims(cases: list[dict]):
    off, on = (c["metrics"] for c in cases)
    return [
        claim("rxhash off: one CPU saturated in softirq (cpu0 softirq > 95 %)", "predicted",
              fig("cpu0 softirq share, rxhash off", off["cpu0_softirq"], ">", 0.95)),
        claim("rxhash off: the saturated CPU runs in ksoftirqd (> 50 % of it)", "predicted",
              fig("ksoftirqd share summed over CPUs, rxhash off", off["ksoftirqd_cpu_sum"],
                  ">", 0.5)),
        claim("rxhash on: load spread, no CPU saturated (all below 90 %)", "predicted",
              fig("busiest CPU's busy share, rxhash on", on["max_cpu_busy"], "<", 0.9)),
        claim("rxhash on: ksoftirqd idle (< 5 % in total)", "predicted",
              fig("ksoftirqd share summed over CPUs, rxhash on", on["ksoftirqd_cpu_sum"],
                  "<", 0.05)),
        claim("rxhash on receives more packets than off", "calibrated",
              fig("rx pps on - off", on["rx_pps"] - off["rx_pps"], ">", 0),
              calibrated_from=CALIBRATED_ON),
        claim("rxhash off rx within 10 % of the seed's 826 kpps", "calibrated",
              fig("rx pps off / 826,500", off["rx_pps"] / 826_500, "within", (0.9, 1.1)),
              calibrated_from=CALIBRATED_OFF),
        claim("the poster's 'global CPU usage' 25 % -> 1 % is top's ksoftirqd/N rows: "
              "99.7 % of one CPU = 25 % of the four with rxhash off; 0.7 + 0.3 = 1 % with it "
              "on, the softirq work now running inline, in no task's row", "predicted",
              fig("ksoftirqd rows, % of the machine, rxhash off",
                  off["ksoftirqd_rows_pct_of_machine"], "within", (20, 30)),
              fig("ksoftirqd rows summed, % of one CPU, rxhash on", on["ksoftirqd_rows_pct"],
                  "<", 2)),
        claim("top's summary line did not fall with rxhash on: busy (100 - id) and si (all "
              "softirq time, inline or in ksoftirqd) both rise", "predicted",
              fig("busy on - busy off, % of the machine",
                  off["top_idle_pct"] - on["top_idle_pct"], ">", 0),
              fig("si on - si off, % of the machine", on["top_si_pct"] - off["top_si_pct"],
                  ">", 0)),
    ]


def notes(exp: dict) -> list[str]:
    """top as the poster would have seen it, per case (means over the seeds)."""
    out = ["What top shows (softirq time is si whether inline or in ksoftirqd; only "
           "ksoftirqd's share appears in a task row; %CPU of one CPU, Irix mode):"]
    for c in exp["cases"]:
        t = c["metrics"]["top"]
        rows = ", ".join(f"{r['command']} {r['cpu_pct']:.1f}" for r in t["ksoftirqd"])
        out += [f"  {c['name']}: {summary_line(t['summary'])}", f"    {rows}"]
    out.append("The poster's 25 % -> 1 % is the ksoftirqd rows (one saturated ksoftirqd/0 = "
               "a quarter of 4 CPUs; then 0.7 + 0.3), not the summary line, whose si rises.")
    return out
