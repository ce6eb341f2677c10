"""``/proc/net/softnet_stat`` as ``softnet_seq_show()`` (net/core/net-procfs.c) prints it.

One line per online CPU, each field ``%08x`` of a u32. Column count follows the kernel
version: 11 (v3.11+), 13 (v5.10+: backlog length, CPU index), 15 (v6.4+: input_pkt_queue
and process_queue lengths).
"""

from __future__ import annotations


def softnet_lines(rows: list[dict], columns: int) -> list[str]:
    out = []
    for r in rows:
        f = [r["processed"], r["dropped"], r["time_squeeze"], 0, 0, 0, 0, 0, 0,
             r["received_rps"], r["flow_limit_count"]]
        if columns >= 13:
            f += [r["backlog_len"], r["cpu"]]
        if columns >= 15:
            f += [r["input_pkt_queue_len"], r["process_queue_len"]]
        out.append(" ".join(f"{v & 0xFFFFFFFF:08x}" for v in f[:columns]))
    return out


def parse_softnet(text: str) -> list[dict]:
    """Parse a softnet_stat dump (ours or a real host's) into per-CPU dicts, the CPU
    from column 12 where the kernel prints it (v5.10+: offline CPUs have no line), else
    the line's position. The one softnet_stat parser of rxlab."""
    rows = []
    lines = [line for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        v = [int(x, 16) for x in line.split()]
        r = {"processed": v[0], "dropped": v[1], "time_squeeze": v[2],
             "received_rps": v[9] if len(v) > 9 else 0,
             "flow_limit_count": v[10] if len(v) > 10 else 0}
        r["cpu"] = v[12] if len(v) > 12 else i
        rows.append(r)
    return rows
