"""What an explanation reads: a scenario (run here, with its flow table) or a saved
``result.json`` (``rxlab run --out DIR``: per-queue, per-CPU and per-socket counters but
no flow table). Beside a saved result ``rxlab run`` writes the scenario it came from;
that scenario is run again and, when it gives the saved result bit for bit (same
rxlab, same capture file), its flow table names the flows; otherwise the result is
explained without them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rxlab.errors import UsageError
from rxlab.explain.flows import Flows, flows_of
from rxlab.explain.saved import read_result


@dataclass
class Subject:
    name: str
    data: dict  # the run's result (``rxlab run --json``)
    flows: Flows | None
    notes: list = field(default_factory=list)
    now: dict = field(default_factory=dict)  # current settings known (for "now X")


def _result_file(target: str) -> Path | None:
    p = Path(target)
    if p.is_dir() and (p / "result.json").exists():  # a FIFO there: refused by read_result
        return p / "result.json"
    if p.suffix == ".json":
        return p
    return None


def load_subject(target: str, overrides: dict, max_memory=None) -> Subject:
    """Run the scenario ``target`` (with ``overrides``), or read a saved result."""
    res_path = _result_file(target)
    if res_path is not None:
        if overrides:
            raise UsageError(f"--set/--seed/--duration: {target} is a saved result; give the "
                             "scenario to change settings")
        data = read_result(res_path)  # strict: one line naming the field, else a dict
        replay = _replay(str(target), res_path, data, max_memory)
        if isinstance(replay, Subject):
            return replay
        cfg = data["config"]
        now = {"netdev_max_backlog": None, "flow_limit_table_len": cfg.get(
            "flow_limit_table_len"), "queues": len(data["queues"])}
        return Subject(str(target), data, None, [
            f"read from a saved result: it has no flow table, so flows are not named "
            f"({replay}); give the scenario to see them"], now)
    from rxlab.scenario import load_scenario, with_overrides

    sc = load_scenario(target)
    if overrides:
        sc = with_overrides(sc, overrides)
    return _run(sc, max_memory)


def _replay(target: str, res_path: Path, data: dict, max_memory) -> Subject | str:
    """The saved result's own scenario, run again: a Subject with flows when it gives
    the saved result bit for bit, else why not (a phrase for the note)."""
    from rxlab.report.files import SCENARIO_FILE
    from rxlab.scenario import load_scenario

    path = res_path.parent / SCENARIO_FILE
    if not path.exists():
        return f"no {SCENARIO_FILE} beside it"
    try:
        sc = load_scenario(path)
        why = _not_this_run(sc, data)
        if why:
            return f"its {SCENARIO_FILE} {why}: not run again"
        sub = _run(sc, max_memory, max_packets=data["packets"]["offered"])
    except UsageError as err:
        return f"its {SCENARIO_FILE} does not run here: {err}"
    except _MorePackets:
        return (f"its {SCENARIO_FILE} offers more than the result's "
                f"{data['packets']['offered']:,} packets; stopped there")
    if json.loads(json.dumps(sub.data)) != data:
        return (f"its {SCENARIO_FILE} gives another result here: another rxlab version or "
                "capture file")
    sub.name = target
    sub.notes.insert(0, f"flows from {path}, run again: it gives the saved result bit for bit")
    return sub


def _not_this_run(sc, data: dict) -> str:
    """Why the scenario cannot give the saved result, by what both record ('' if it
    may): a replay is bounded like a fresh explain run, and by the result it replays."""
    from rxlab.cli.explain_cmd import MAX_DURATION_S

    if sc.duration > MAX_DURATION_S:
        return f"runs {sc.duration:g} s of traffic, more than explain runs ({MAX_DURATION_S:g} s)"
    if "duration_s" in data and sc.duration != data["duration_s"]:
        return f"runs {sc.duration:g} s of traffic, the result {data['duration_s']:g} s"
    if "seed" in data and sc.seed != data["seed"]:
        return f"has seed {sc.seed}, the result seed {data['seed']}"
    return ""


class _MorePackets(Exception):
    """The replay offered more packets than the saved result: not its run."""


def _run(sc, max_memory, max_packets: int | None = None) -> Subject:
    from rxlab.build import build
    from rxlab.metrics.result import assemble
    from rxlab.simulate import check_conservation, in_flight, run_model

    def bound(done: int, _t: float) -> None:
        if max_packets is not None and done > max_packets:
            raise _MorePackets

    m = build(sc, max_memory=max_memory)
    run_model(m, progress=bound)
    res = assemble(m, in_flight(m))
    check_conservation(m, res)
    fl = flows_of(m)
    k, nic = sc.kernel, sc.nic
    now = {"ring_size": nic.ring_size, "queues": nic.queues, "rx_usecs": nic.rx_usecs,
           "napi_defer_hard_irqs": nic.napi_defer_hard_irqs,
           "gro_flush_timeout": nic.gro_flush_timeout,
           "netdev_max_backlog": k.netdev_max_backlog, "netdev_budget": k.netdev_budget,
           "flow_limit_cpu_bitmap": k.flow_limit_cpu_bitmap,
           "flow_limit_table_len": k.flow_limit_table_len,
           "rcvbuf": [a.rcvbuf for a in sc.apps for _ in a.cpu_list()],
           "batch": [a.batch for a in sc.apps for _ in a.cpu_list()],
           "spread": [a.spread for a in sc.apps for _ in a.cpu_list()]}
    return Subject(sc.name, res.data, fl, list(fl.notes), now)
