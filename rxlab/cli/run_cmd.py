"""``rxlab run [SCENARIO] [--seed N] [--duration S] [--json] [--out DIR [--force]]
[--set K=V] [--max-memory SIZE]``."""

from __future__ import annotations

import argparse
import sys

from rxlab.errors import UsageError
from rxlab.scenario import load_scenario, with_overrides

PROGRESS_MIN_PACKETS = 2_000_000  # below this a run takes about a second: no bar


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "run", help="simulate a scenario and report what the kernel would report",
        description="Simulate SCENARIO (a YAML file or a built-in name; default: 'default').")
    p.add_argument("scenario", nargs="?", default="default", metavar="SCENARIO")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--duration", type=float, help="override the traffic duration (seconds)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a field by dotted path, e.g. kernel.netdev_max_backlog=2000")
    p.add_argument("--pcap", metavar="FILE", help="replay a pcap/pcapng capture as traffic")
    p.add_argument("--speedup", type=float, default=1.0, help="replay speed-up factor")
    p.add_argument("--allow-truncated", action="store_true",
                   help="replay the intact prefix of a truncated capture")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", metavar="DIR", help="write result.json, series.csv and plots")
    add_force(p)
    p.add_argument("--softnet", action="store_true",
                   help="print only the simulated /proc/net/softnet_stat")
    p.add_argument("--seeds", type=int, metavar="N",
                   help="N independent replications (seeds seed..seed+N-1); report means "
                        "with 95%% confidence intervals")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="worker processes for --seeds (default: the number of CPUs)")
    add_max_memory(p)
    p.set_defaults(func=run)
    return p


def add_force(p: argparse.ArgumentParser) -> None:
    """--force, shared by every subcommand with --out DIR."""
    p.add_argument("--force", action="store_true",
                   help="write into an --out folder that holds other files too (rxlab "
                        "replaces only the files it wrote there before)")


def check_seeds_jobs(seeds: int | None, jobs: int | None) -> None:
    """--seeds is a count of replications and --jobs of worker processes, in every command."""
    if seeds is not None and seeds < 1:
        raise UsageError(f"--seeds {seeds}: give a number of replications >= 1")
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: give a number of processes >= 1")
    if jobs is not None and seeds is None:
        raise UsageError(f"--jobs {jobs}: worker processes for replications; add --seeds N "
                         f"(e.g. --seeds 5 --jobs {jobs})")


def add_max_memory(p: argparse.ArgumentParser) -> None:
    """--max-memory, shared by every subcommand that simulates."""
    p.add_argument("--max-memory", metavar="SIZE",
                   help="refuse a scenario whose estimated memory exceeds SIZE (8GiB, 512MiB, "
                        "2G or bytes) before allocating anything; default: 50%% of the "
                        "memory rxlab may use (physical, cgroup limit, ulimit -v; see "
                        "docs/limits.md)")


def print_notices(data: dict) -> None:
    for n in data.get("notices", []):
        print(f"rxlab: {n}", file=sys.stderr)


def run_overrides(args) -> dict:
    """--set items plus --seed and --duration, as scenario overrides {path: value}."""
    ov = parse_sets(args.set)
    if args.seed is not None:
        ov["seed"] = args.seed
    if args.duration is not None:
        if args.duration <= 0:
            raise UsageError("--duration: must be > 0 seconds")
        ov["duration"] = args.duration
    return ov


def parse_sets(items: list[str]) -> dict:
    """--set PATH=VALUE items -> {path: value}. The value is YAML read by the scenario
    loader, so a number keeps its text (host.kernel=5.15 is "5.15", rps_cpus=10 is the
    mask "10"); a malformed value is a one-line error."""
    from rxlab.inputs import parse_yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: use PATH=VALUE, e.g. kernel.dev_weight=128")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = parse_yaml(v, "")
        except UsageError as err:
            shown = item if len(item) <= 60 else item[:57] + "..."
            raise UsageError(f"--set {shown!r}: {str(err).lstrip(': ')}; quote text that is "
                             "not YAML, e.g. --set 'name=\"[x\"'") from None
    return out


def run(args) -> int:
    from rxlab.memory_budget import process_limit

    with process_limit(args.max_memory):
        return _run(args)


def _run(args) -> int:
    from rxlab.report.printable import terminal_result
    from rxlab.report.tables import print_result
    from rxlab.simulate import simulate

    check_seeds_jobs(args.seeds, args.jobs)
    if args.out:  # before any work: a folder that cannot be made is bad input
        from rxlab.report.files import RUN_FILES, check_out_dir

        names = ("replications.json",) if args.seeds is not None else RUN_FILES
        check_out_dir(args.out, force=args.force, names=names)
    sc = load_scenario(args.scenario)
    ov = run_overrides(args)
    if args.pcap:
        from rxlab.capture.pcap import open_capture
        from rxlab.memory_budget import check

        ov["traffic"] = {"pcap": {"file": args.pcap, "speedup": args.speedup,
                                  "allow_truncated": args.allow_truncated}}
        check(with_overrides(sc, ov))  # flows bounded by the file's size, before the scan
        cap = open_capture(args.pcap, speedup=args.speedup,
                           allow_truncated=args.allow_truncated)
        if cap.notice:
            print(f"rxlab: {cap.notice}", file=sys.stderr)
        if args.duration is None:
            ov["duration"] = cap.duration_s
    if ov:
        sc = with_overrides(sc, ov)
    if args.seeds is not None:
        return _run_seeds(args, sc)
    res = _simulate_with_progress(simulate, sc, quiet=args.json)
    text = res.to_json(indent=1)  # a non-finite number fails here, before any file
    print_notices(res.data)
    if args.out:
        from rxlab.report.files import write_out

        write_out(res, args.out, sc, force=args.force)
    if args.json:
        print(text)
    elif args.softnet:  # the file alone, as `cat /proc/net/softnet_stat` prints it
        sys.stdout.write(res.softnet_stat)
    else:
        print_result(terminal_result(res.data))  # names escaped; --json keeps them
        if args.out:
            print(f"wrote {args.out}/ (result.json, scenario.yaml, series.csv, softnet_stat, "
                  "*.png)")
    return 0


def _run_seeds(args, sc) -> int:
    """--seeds N: replications, in --jobs worker processes (rxlab.bench.replicate)."""
    from rxlab.bench.replicate import print_table, replicate

    if args.softnet:
        raise UsageError("--softnet: not available with --seeds (see the runs in --json)")
    rep = replicate(sc, args.seeds, args.jobs)
    if args.out:
        from rxlab.outfiles import OutDir

        with OutDir(args.out, force=args.force) as tmp:
            (tmp / "replications.json").write_text(dump_json(rep) + "\n")
    if args.json:
        print(dump_json(rep))
    else:
        from rxlab.report.tables import make_console

        print_table(rep, make_console())
        if args.out:
            print(f"wrote {args.out}/replications.json")
    return 0


def _simulate_with_progress(simulate, sc, quiet: bool):
    from rxlab.build import build  # noqa: F401  (import cost paid before the bar)
    from rxlab.traffic.stream import PacketStream  # noqa: F401

    expected = sum(g.rate.pps * (min(g.stop or sc.duration, sc.duration) - g.start)
                   for g in sc.traffic.groups) if sc.traffic.pcap is None else 0
    if expected < PROGRESS_MIN_PACKETS:
        return simulate(sc)
    if quiet or not sys.stderr.isatty():  # --json, or stderr to a pipe or file: no bar
        return simulate(sc, progress=EstimateLine(expected))
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]simulating"), BarColumn(),
                  TextColumn("{task.completed:,.0f}/{task.total:,.0f} packets"),
                  TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task("run", total=expected)
        return simulate(sc, progress=lambda n, t: bar.update(task, completed=n))


class EstimateLine:
    """A progress callback for a run with no bar: once the loop's speed on this machine
    has been measured over ``MEASURE_S`` of simulating, a run whose remaining time
    exceeds ``LONG_S`` says so in one line on stderr: a pipe or --json is not silent
    for hours."""

    MEASURE_S = 0.25  # a chunk or two (1 << 18 packets each): the line comes in seconds
    LONG_S = 10.0

    def __init__(self, expected: float, out=None):
        import time

        self.expected, self.out, self.clock = expected, out, time.monotonic
        self.start: tuple[float, int] | None = None  # the first chunk's end: its time
        # holds numba's loading of the compiled loop, not the loop's speed
        self.said = False

    def __call__(self, done: int, _sim_s: float) -> None:
        if self.said:
            return
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
            return
        t0, n0 = self.start
        if now - t0 < self.MEASURE_S or done <= n0:
            return
        self.said = True
        rate = (done - n0) / (now - t0)
        left = (self.expected - done) / rate
        if left > self.LONG_S:
            from rxlab.report.fit import fmt_rate

            print(f"rxlab: simulating {self.expected:,.0f} packets: about {_duration(left)} "
                  f"more at {fmt_rate(rate)} (this machine's speed so far)",
                  file=self.out or sys.stderr, flush=True)


class PlanLine:
    """The same for a plan of runs (``reproduce``): the runs after the first (which
    loads the compiled loop) give, after a second, the time of the rest; more than
    ``EstimateLine.LONG_S`` is said once on stderr. Called as
    ``progress(done, total, name)``."""

    MEASURE_S = 1.0

    def __init__(self, what: str, out=None):
        import time

        self.what, self.out, self.clock = what, out, time.monotonic
        self.start: tuple[float, int] | None = None
        self.said = False

    def __call__(self, done: int, total: int, _name: str = "") -> None:
        if self.said or done < 1:
            return
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
            return
        t0, d0 = self.start
        if now - t0 < self.MEASURE_S or done <= d0:
            return
        self.said = True
        left = (now - t0) / (done - d0) * (total - done)
        if left > EstimateLine.LONG_S:
            print(f"rxlab: {self.what}: {total} runs, about {_duration(left)} more "
                  f"({done} done)", file=self.out or sys.stderr, flush=True)


def _duration(s: float) -> str:
    """12 s, 4 min 10 s, 2 h 05 min."""
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def dump_json(obj) -> str:
    from rxlab.jsonout import dumps

    return dumps(obj, indent=1, sort_keys=True)
