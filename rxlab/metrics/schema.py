"""The result of a run as a typed model: what ``rxlab run --json`` prints and
``result.json`` holds, field by field, with the kernel tool each figure stands for.

``RunResult.model_json_schema()`` is the JSON Schema rxlab ships
(``rxlab/schemas/result.schema.json``, written by ``scripts/schemas.py``) and
``docs/output.md`` is generated from it; tests validate every built-in scenario's output
and every reproduction's against these models. Models forbid keys they do not declare,
so a new output field is declared here first.
"""

from __future__ import annotations

import difflib
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model

from rxlab.kernel.drop_reasons import DROP_REASON_DOC
from rxlab.kernel.state import ARFS_MODELS
from rxlab.mechanisms import ARFS, CPUMAP, RFS


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _counts(name: str, docs: dict[str, str], doc: str) -> type[BaseModel]:
    """A block of integer counters, one per name, each with its meaning."""
    fields = {k: (int, Field(ge=0, description=d)) for k, d in docs.items()}
    return create_model(name, __base__=_Out, __doc__=doc, **fields)


def _declared(mech) -> dict[str, str]:
    """A mechanism's counters and their meanings, as it declares them."""
    return {c.name: c.doc for c in mech.counters}


DroppedByReason = _counts("DroppedByReason", DROP_REASON_DOC, "Dropped packets by reason, "
                          "named after the kernel's enum skb_drop_reason or the counter "
                          "that shows the drop.")
Rfs = _counts("Rfs", _declared(RFS), "RFS and its aRFS hook.")
Arfs = _counts("Arfs", {**{k.removeprefix("arfs_"): v for k, v in _declared(ARFS).items()},
                        "filters_in_hw": "filters in the NIC at the end"},
               "aRFS as the driver runs it (nic.arfs): its filter table and lock.")
_CpumapCounters = _counts("_CpumapCounters", _declared(CPUMAP), "")


class Packets(_Out):
    """Every packet accounted for: offered = delivered + dropped + forwarded + in_flight."""

    offered: int = Field(ge=0, description="packets the traffic put on the wire")
    delivered: int = Field(ge=0, description="packets an application's recv() returned "
                           "(or an AF_XDP socket received)")
    dropped: int = Field(ge=0, description="sum of dropped_by_reason")
    forwarded: int = Field(ge=0, description="XDP_TX / AF_XDP forwarded packets")
    in_flight: int = Field(ge=0, description="still queued when the run's drain ended")
    dropped_by_reason: DroppedByReason = Field(  # type: ignore[valid-type]
        description="dropped, by reason")


class Throughput(_Out):
    """Packet rates over the traffic window."""

    offered_pps: float = Field(ge=0, description="offered / duration_s")
    delivered_pps: float = Field(ge=0, description="delivered / duration_s")
    processed_pps: float = Field(ge=0, description="softnet_stat processed, all CPUs, "
                                 "/ duration_s")


class Util(_Out):
    """Shares of the traffic window as /proc/stat splits a CPU's time (sum to 1)."""

    softirq: float = Field(ge=0, le=1, description="softirq time, inline and in ksoftirqd")
    ksoftirqd: float = Field(ge=0, le=1, description="of softirq: the part ksoftirqd/N ran")
    irq: float = Field(ge=0, le=1, description="hard interrupt handlers")
    system: float = Field(ge=0, le=1, description="kernel time of tasks (recvmsg, kthreads)")
    user: float = Field(ge=0, le=1, description="applications' own work")
    idle: float = Field(ge=0, le=1, description="1 - the rest")


class SoftnetStat(_Out):
    """/proc/net/softnet_stat's columns of this CPU, named as net/core/net-procfs.c does."""

    processed: int = Field(ge=0, description="packets this CPU's softirq handed to the "
                           "stack (__netif_receive_skb)")
    dropped: int = Field(ge=0, description="enqueue_to_backlog drops (backlog and flow "
                         "limit)")
    time_squeeze: int = Field(ge=0, description="net_rx_action stopped on budget or time")
    received_rps: int = Field(ge=0, description="RPS IPIs this CPU received")
    flow_limit_count: int = Field(ge=0, description="drops by skb_flow_limit on this CPU")
    backlog_len: int = Field(ge=0, description="input_pkt_queue + process_queue at the end")
    input_pkt_queue_len: int = Field(ge=0, description="its input_pkt_queue at the end")
    process_queue_len: int = Field(ge=0, description="its process_queue at the end")


class Cpu(_Out):
    """One CPU: its time as /proc/stat splits it and its softnet_stat row."""

    cpu: int = Field(ge=0, description="CPU number")
    util: Util = Field(description="shares of the traffic window (sum to 1)")
    softnet_stat: SoftnetStat = Field(description="its /proc/net/softnet_stat row")


class Queue(_Out):
    """An rx queue (ethtool -S rx_queue_N_*) and its interrupt."""

    queue: int = Field(ge=0, description="rx queue number")
    irq_cpu: int = Field(ge=0, description="CPU its interrupt is affine to "
                         "(/proc/irq/N/smp_affinity_list)")
    packets: int = Field(ge=0, description="packets the queue received (rx_queue_N_packets)")
    ring_full_drops: int = Field(ge=0, description="arrivals that found its ring full")
    polls: int = Field(ge=0, description="NAPI polls of this queue")
    irqs: int = Field(ge=0, description="device interrupts it raised (its line of "
                      "/proc/interrupts)")
    timer_polls: int = Field(ge=0, description="polls its NAPI's hrtimer scheduled with the "
                             "IRQ deferred (napi_watchdog: napi_defer_hard_irqs, "
                             "gro_flush_timeout)")
    empty_polls: int = Field(ge=0, description="driver polls that found no packet")
    napi_thread_cpu: int | None = Field(None, ge=0, description="threaded NAPI: the CPU "
                                        "napi/DEV-ID ran on")
    napi_thread_cpu_s: float | None = Field(None, ge=0, description="threaded NAPI: its "
                                            "CPU time (s)")
    busy_poll_packets: int | None = Field(None, ge=0, description="busy polling: packets "
                                          "application busy polls took from it "
                                          "(LINUX_MIB_BUSYPOLLRXPACKETS, TcpExt "
                                          "BusyPollRxPackets)")


class App(_Out):
    """An application thread (apps[].threads of the scenario)."""

    app: str = Field(description="the application's name (apps[].name)")
    cpu: int = Field(ge=0, description="the CPU it ran on at the end")
    served: int = Field(ge=0, description="packets its recv() returned")
    served_pps: float = Field(ge=0, description="served / duration_s")
    socket_drops: int = Field(ge=0, description="its socket's receive-buffer and backlog "
                              "drops")
    wakeups: int = Field(ge=0, description="times a packet woke it (sk_data_ready)")
    wakeups_remote: int = Field(ge=0, description="of wakeups: sent from another CPU (an "
                                "IPI)")
    busy_poll_packets: int | None = Field(None, ge=0, description="busy polling: packets "
                                          "its reads' busy polls took (their share of "
                                          "LINUX_MIB_BUSYPOLLRXPACKETS)")
    busy_poll_s: float | None = Field(None, ge=0, description="busy polling: CPU time of "
                                      "its busy loops, polls and spinning (system time, s)")


class Task(_Out):
    """CPU time of one task over the whole run, as /proc/PID/stat would show it."""

    task: str = Field(description="name as ps shows it: server/0, ksoftirqd/1, napi/q0, "
                      "backlog_napi/1, cpumap/2, kworker/0 (aRFS)")
    kind: Literal["app", "ksoftirqd", "napi", "cpumap", "kworker"] = Field(
        description="what the task is")
    cpu: int = Field(ge=0, description="the CPU it ran on")
    cpu_s: float = Field(ge=0, description="utime + stime with tick-based accounting")
    softirq_s: float = Field(ge=0, description="of cpu_s: softirq work run in this task")
    share: float = Field(ge=0, description="cpu_s / (duration_s + drain)")


class Latency(_Out):
    """A latency distribution (ns); every statistic is null without samples."""

    p50: float | None = Field(None, description="median (ns)")
    p99: float | None = Field(None, description="99th percentile (ns)")
    p999: float | None = Field(None, description="99.9th percentile (ns)")
    mean: float | None = Field(None, description="mean (ns)")
    max: float | None = Field(None, description="largest (ns, its histogram bucket)")
    samples: int = Field(ge=0, description="packets measured")


class LatencyNs(_Out):
    """Latency from the wire: to the socket, to the application, in the NIC."""

    p50: float | None = Field(None, description="= to_socket.p50")
    p99: float | None = Field(None, description="= to_socket.p99")
    p999: float | None = Field(None, description="= to_socket.p999")
    mean: float | None = Field(None, description="= to_socket.mean")
    to_socket: Latency = Field(description="wire arrival to the socket's receive queue")
    to_app: Latency = Field(description="wire arrival to the application's recv()")
    nic_wait: Latency = Field(description="wire arrival to NIC service at its packet-rate "
                              "ceiling (nic.max_pps)")


class GroupCounts(_Out):
    """A traffic group's packets."""

    flows: int = Field(ge=0, description="flows in the group")
    offered: int = Field(ge=0, description="packets its flows sent")
    delivered: int = Field(ge=0, description="of them: delivered to an application")


class Steering(_Out):
    """Whether packets reached the CPU their consumer runs on."""

    good_queue_packets: int = Field(ge=0, description="arrived on a queue whose interrupt "
                                    "CPU is the consumer's")
    bad_queue_packets: int = Field(ge=0, description="arrived on another CPU's queue")
    thread_migrations: int = Field(ge=0, description="consumer threads moved between CPUs")


class Tcp(_Out):
    """Where TCP segments were processed (tcp_v4_rcv: socket not owned, owned, ...)."""

    local: int = Field(ge=0, description="on the consumer's CPU")
    remote: int = Field(ge=0, description="on another CPU (cache lines travel)")
    backlog: int = Field(ge=0, description="queued to the owned socket's backlog")
    out_of_order: int = Field(ge=0, description="into the out-of-order queue")


class Xdp(_Out):
    """The XDP program's verdicts (bpftool prog / xdp tracepoints)."""

    runs: int = Field(ge=0, description="program runs")
    pass_: int = Field(ge=0, alias="pass", description="XDP_PASS")
    drop: int = Field(ge=0, description="XDP_DROP")
    aborted: int = Field(ge=0, description="XDP_ABORTED (and redirects with no entry)")
    tx: int = Field(ge=0, description="XDP_TX")
    redirect: int = Field(ge=0, description="XDP_REDIRECT (cpumap, xskmap)")


class CpumapEntry(_CpumapCounters):  # type: ignore[valid-type,misc]
    """A cpumap entry: what the xdp:xdp_cpumap_enqueue and xdp_cpumap_kthread
    tracepoints sum to."""

    cpu: int = Field(ge=0, description="the entry's CPU (its kthread's)")
    qsize: int = Field(ge=1, description="its ptr_ring size (bpf_cpumap_val.qsize)")
    bulk_average: float = Field(ge=0, description="frames per bq_flush_to_queue")
    ring_len: int = Field(ge=0, description="frames in the ptr_ring at the end")


class Capture(_Out):
    """The replayed capture (--pcap)."""

    file: str = Field(description="its path")
    format: str = Field(description="pcap or pcapng")
    linktypes: list[int] = Field(description="LINKTYPE_* values of its interfaces")
    records: int = Field(ge=0, description="records read")
    packets: int = Field(ge=0, description="of them: packets replayed")
    flows: int = Field(ge=0, description="distinct 5-tuples")
    skipped: dict[str, int] = Field(description="records not replayed, by cause")
    reordered: int = Field(ge=0, description="records with a time before the last one's")
    bytes: int = Field(ge=0, description="bytes on the wire")
    duration_s: float = Field(ge=0, description="first to last timestamp, after speedup")
    speedup: float = Field(gt=0, description="--speedup")
    truncated_at: int | None = Field(description="byte offset where a truncated file's "
                                     "intact prefix ends")
    truncation: str | None = Field(description="what was wrong at truncated_at")


class Refill(_Out):
    """When consumed rx buffers go back to the NIC (the tail or doorbell write)."""

    rule: str = Field(description="per-packet, poll-end, threshold or every")
    batch: float = Field(description="threshold: consumed buffers (a ring fraction if < 1)")
    where: str = Field(description="in-loop, after-loop or none")
    keep_empty: int = Field(description="descriptors never handed to the NIC")
    tail_align: int = Field(description="the tail register's alignment")


class Moderation(_Out):
    """Interrupt moderation the driver starts with (ethtool -c)."""

    adaptive: bool = Field(description="adaptive-rx")
    rx_usecs: float = Field(description="rx-usecs")
    start_usecs: float | None = Field(description="adaptive: the first value")
    rx_frames: int = Field(description="rx-frames (0: none)")


class Driver(_Out):
    """The driver preset in effect and where each value came from (rxlab.drivers)."""

    name: str = Field(description="the preset (nic.driver)")
    from_preset: dict[str, Any] = Field(description="scenario fields the preset filled")
    ring_max: int = Field(description="ethtool -g maximum")
    table_max: int = Field(description="largest RSS indirection table")
    rss_key_bytes: int = Field(description="RSS key length")
    poll: str = Field(description="the driver's poll rule")
    refill: Refill = Field(description="its refill rule")
    moderation: Moderation = Field(description="its interrupt moderation")
    arfs_models: list[str] = Field(description="the aRFS models it supports")
    sources: dict[str, str] = Field(description="the source of each value (driver file, "
                                    "datasheet)")


class XdpConfig(_Out):
    """The XDP program (xdp section)."""

    rules: int = Field(ge=0, description="its rules")
    default: str = Field(description="the verdict of a packet no rule matches")
    hash_metadata: bool = Field(description="it reads the RSS hash (bpf_xdp_metadata_rx_hash)")
    flows_by_verdict: dict[str, int] = Field(description="flows per verdict")


class CpumapConfig(_Out):
    """The cpumap (cpumap section)."""

    cpus: list[int] = Field(description="CPUs with an entry")
    qsize: int = Field(description="each entry's ptr_ring size")
    ptr_ring_batch: int = Field(description="the ptr_ring's consumer batch")
    gro: bool = Field(description="the kthread hands skbs to GRO (v6.15+)")


class Thread(_Out):
    """An application thread and its CPU."""

    app: str = Field(description="the application")
    cpu: int = Field(ge=0, description="its CPU at the start")


class Config(_Out):
    """The configuration the run used, resolved: every default and preset value filled in,
    named as the kernel's knobs are."""

    kernel: str = Field(description="host.kernel")
    driver: Driver = Field(description="the driver preset in effect")
    softnet_stat_columns: int = Field(description="11, 13 or 15 by version")
    rps_cpus: list[str] = Field(description="/sys/class/net/DEV/queues/rx-N/rps_cpus")
    rps_needed: bool = Field(description="the rps_needed static key is on")
    rx_mode: str = Field(description="napi (driver polls) or netif_rx (backlog)")
    flow_limit_cpus: list[int] = Field(description="net.core.flow_limit_cpu_bitmap")
    flow_limit_table_len: int = Field(description="net.core.flow_limit_table_len")
    flow_limit_history: int = Field(description="FLOW_LIMIT_HISTORY")
    flow_limit_bucket: str = Field(description="the bucket rule by version")
    netdev_budget_usecs: int = Field(description="net.core.netdev_budget_usecs")
    budget_jiffies: int = Field(description="net_rx_action's time limit in jiffies")
    hz: int = Field(description="CONFIG_HZ")
    irq_affinity: list[int] = Field(description="each queue's interrupt CPU")
    indirection_table: list[int] = Field(description="ethtool -x")
    ksoftirqd_defers: bool = Field(description="4.9-6.4: nothing runs inline while "
                                   "ksoftirqd is pending")
    threaded: bool = Field(description="/sys/class/net/DEV/threaded")
    napi_thread_affinity: list[int] | None = Field(description="threaded NAPI: each "
                                                   "queue's kthread CPU")
    cost_profile: str = Field(description="host.cost_profile")
    costs_ns: dict[str, float] = Field(description="the cost stages in effect (ns)")
    flows: int = Field(ge=0, description="flows in the traffic")
    rps_sock_flow_entries: int = Field(description="net.core.rps_sock_flow_entries")
    rps_flow_cnt: list[int] = Field(description="each queue's rps_flow_cnt")
    rfs_slot: str = Field(description="the rps_dev_flow slot rule by version")
    arfs: Literal[ARFS_MODELS[1:]] | None = Field(  # type: ignore[valid-type]
        None, description="the aRFS model (nic.arfs), null when off")
    arfs_protect_active: bool = Field(description="v6.18: set_rps_cpu protects active "
                                      "slots")
    threads: list[Thread] = Field(description="application threads")
    interval_s: float = Field(description="series interval (s)")
    intervals: int = Field(description="series intervals kept")
    xdp: XdpConfig | None = Field(description="the XDP program, null without one")
    cpumap: CpumapConfig | None = Field(description="the cpumap, null without one")


class RunResult(_Out):
    """What ``rxlab run --json`` prints and ``result.json`` holds."""

    scenario: str = Field(description="the scenario's name")
    seed: int = Field(description="the traffic and jitter seed")
    duration_s: float = Field(gt=0, description="traffic duration (s)")
    kernel: str = Field(description="the kernel version modelled")
    config: Config = Field(description="the configuration, resolved")
    packets: Packets = Field(description="every packet accounted for")
    throughput: Throughput = Field(description="rates over duration_s")
    cpus: list[Cpu] = Field(description="one per CPU")
    queues: list[Queue] = Field(description="one per rx queue")
    apps: list[App] = Field(description="one per application thread")
    tasks: list[Task] = Field(description="every task that ran: ps / top's view")
    latency_ns: LatencyNs = Field(description="latency distributions")
    reordered_packets: int = Field(ge=0, description="packets a flow's socket got after a "
                                   "later one")
    flows_by_group: dict[str, GroupCounts] = Field(description="per traffic group")
    steering: Steering = Field(description="queue and CPU locality")
    rfs: Rfs = Field(description="RFS counters")  # type: ignore[valid-type]
    arfs: Arfs = Field(description="aRFS counters")  # type: ignore[valid-type]
    softnet_stat: list[str] = Field(description="/proc/net/softnet_stat, one line per CPU")
    notices: list[str] = Field(description="what rxlab changed or noticed (printed on "
                               "stderr)")
    tcp: Tcp | None = Field(None, description="TCP flows: where segments were processed")
    xdp: Xdp | None = Field(None, description="with an XDP program: its verdicts")
    cpumap: list[CpumapEntry] | None = Field(None, description="with a cpumap: per entry")
    capture: Capture | None = Field(None, description="with --pcap: the capture replayed")


def validate_run(data: dict) -> RunResult:
    """The run's --json dict checked against the model (pydantic ValidationError if not)."""
    return RunResult.model_validate(data)


# ----------------------------------------------------------- rxlab reproduce --json ----

class ReproRun(_Out):
    """One seed's run of a case."""

    seed: int = Field(description="its traffic seed")
    metrics: dict[str, Any] = Field(description="the experiment's metrics of this run")


class ReproCase(_Out):
    """A case of the experiment: its settings, its runs and their means."""

    name: str = Field(description="the case's name")
    params: dict[str, Any] = Field(description="what this case sets (kernel, knobs)")
    metrics: dict[str, Any] = Field(description="mean over the seeds' runs")
    ci95: dict[str, float | None] = Field(description="half-width of the 95 % t interval of "
                                          "each scalar metric (rxlab.stats)")
    runs: list[ReproRun] = Field(description="one per seed")


class ClaimFigure(_Out):
    """A figure of a claim over the seeds, against its bound."""

    figure: str = Field(description="what is measured")
    op: Literal["<", "<=", ">", ">=", "within", "true"] = Field(description="the test")
    bound: float | list[float] | None = Field(description="the bound, or [low, high] for "
                                              "within")
    mean: float = Field(description="mean over the seeds")
    ci95: list[float] = Field(min_length=2, max_length=2, description="[low, high]")
    values: list[float] = Field(description="one per seed")
    held: bool = Field(description="the whole interval meets the bound")


class Claim(_Out):
    """A finding of the seed's posting, checked."""

    claim: str = Field(description="what the posting found, in its words")
    basis: Literal["calibrated", "predicted"] = Field(description="predicted: no cost set "
                                                      "from this figure")
    calibrated_from: str | None = Field(description="the cost set from the seed's own "
                                        "figure, when calibrated")
    held: bool = Field(description="every figure held")
    seeds: int = Field(ge=2, description="traffic seeds")
    figures: list[ClaimFigure] = Field(description="what it is judged on")


class ReproductionResult(_Out):
    """What ``rxlab reproduce NAME --json`` prints."""

    experiment: str = Field(description="its name (rxlab list)")
    title: str = Field(description="the seed and setup")
    kernels: list[str] = Field(description="kernel versions the cases ran")
    seed_file: str = Field(description="the posting under shared/seeds/")
    seeds: int = Field(ge=2, description="traffic seeds per case")
    quick: bool = Field(description="--quick (shorter traffic)")
    cases: list[ReproCase] = Field(description="its cases")
    claims: list[Claim] = Field(description="the posting's findings, checked")
    seed_table: dict[str, Any] | None = Field(None, description="the posting's own table "
                                              "beside the model's (experiments that have one)")


def validate_reproduction(data: dict) -> ReproductionResult:
    return ReproductionResult.model_validate(data)

SCHEMAS = {"result": RunResult, "reproduction": ReproductionResult}


def json_schema(name: str) -> dict:
    """The JSON Schema (draft 2020-12) of one output, as rxlab/schemas/NAME.schema.json."""
    model = SCHEMAS[name]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://rxlab.dev/schemas/{name}.schema.json",
            **model.model_json_schema(by_alias=True)}


def _type(prop: dict) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    t = prop.get("type", "any")
    if t == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if t == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map to {_type(prop['additionalProperties'])}"
    return {"integer": "int", "number": "float", "boolean": "bool", "string": "str",
            "null": "null", "object": "object"}.get(t, t)


def _table(title: str, schema: dict) -> list[str]:
    out = [f"### {title}", ""]
    if schema.get("description"):
        out += [" ".join(schema["description"].split()), ""]
    out += ["| field | type | meaning |", "|---|---|---|"]
    req = set(schema.get("required", []))
    for key, prop in schema.get("properties", {}).items():
        meaning = " ".join(prop.get("description", "").split()).replace("|", "\\|")
        opt = "" if key in req else " (optional)"
        out.append(f"| `{key}` | {_type(prop)}{opt} | {meaning} |")
    return out + [""]


def markdown(name: str) -> str:
    """docs/output.md's section for one output: its top level, then each part it uses."""
    s = json_schema(name)
    lines = _table(f"`{name}`: {SCHEMAS[name].__name__}", s)
    for key, sub in sorted(s.get("$defs", {}).items()):
        if sub.get("type") == "object" and "properties" in sub:
            lines += _table(key, sub)
    return "\n".join(lines)


# ----------------------------------------------------------- metric paths ----------

def _unwrap(ann):
    """X from X | None (a section a scenario may not have)."""
    args = [a for a in get_args(ann) if a is not type(None)]
    if get_origin(ann) in (Union, UnionType) and len(args) == 1:
        return args[0]
    return ann


def _child(ann, part: str):
    """The annotation one dotted part below ``ann``, or None when there is no such part."""
    ann = _unwrap(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        for name, f in ann.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
        return None
    if get_origin(ann) is list:
        return get_args(ann)[0] if part.isdigit() else None
    if get_origin(ann) is dict:
        return get_args(ann)[1]
    return None


def _parts(ann) -> list[str]:
    ann = _unwrap(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [f.alias or n for n, f in ann.model_fields.items()]
    return ["0"] if get_origin(ann) is list else []


def metric_path_problem(path: str) -> str | None:
    """None when ``path`` (``latency_ns.to_app.p99``, ``cpus.0.util.softirq``) names a
    number in a run's result, else what is wrong with it: the first part that does not
    exist, with the parts that do."""
    ann, done = RunResult, []
    for part in path.split("."):
        nxt = _child(ann, part)
        if nxt is None and get_origin(_unwrap(ann)) is list:
            where = ".".join(done)
            return f"{where} is a list: give an index, e.g. {where}.0 (docs/output.md)"
        if nxt is None:
            where = ".".join(done) or "the result"
            near = difflib.get_close_matches(part, _parts(ann), n=1)
            hint = f"did you mean {'.'.join([*done, near[0]])!r}? " if near else ""
            return (f"{where} has no {part!r}; {hint}it has "
                    + ", ".join(_parts(ann)) + " (docs/output.md)")
        ann, done = nxt, [*done, part]
    if _unwrap(ann) not in (int, float):
        eg = _first_number(ann, path)
        return (f"{path!r} is not a number but a section; name a figure in it, e.g. {eg} "
                "(docs/output.md)" if eg else f"{path!r} is not a number (docs/output.md)")
    return None


def _first_number(ann, path: str, depth: int = 0) -> str | None:
    """The first path below ``ann`` that names a number (an example for a message)."""
    if _unwrap(ann) in (int, float):
        return path
    if depth > 6:
        return None
    for part in _parts(ann):
        found = _first_number(_child(ann, part), f"{path}.{part}", depth + 1)
        if found:
            return found
    return None
