"""``rxlab``: the console script. Subcommands live in their own modules and register here.

Each module has ``add_parser(subparsers)`` (which sets ``func``) and ``run(args) -> int``.
Bad input anywhere raises ``UsageError``: printed as one line, exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import importlib.util
import os
import sys

from rxlab._cache import NOTICE_ENV
from rxlab.errors import ConservationError, OutputError, UsageError
from rxlab.report.printable import printable

# subcommand modules, in the order `rxlab --help` lists them
COMMANDS = [
    "rxlab.cli.run_cmd",
    "rxlab.cli.compare_cmd",
    "rxlab.cli.reproduce_cmd",
    "rxlab.cli.hash_cmd",
    "rxlab.cli.list_cmd",
    "rxlab.cli.explain_cmd",
    "rxlab.cli.sweep_cmd",
    "rxlab.cli.report_cmd",
    "rxlab.cli.host_cmd",
    "rxlab.cli.top_cmd",
    "rxlab.cli.bench_cmd",
    "rxlab.cli.kcheck_cmd",
    "rxlab.cli.calibrate_cmd",
    "rxlab.cli.tune_cmd",
    "rxlab.cli.cache_cmd",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print usage too)
        raise UsageError(message if self.prog == "rxlab" else f"{self.prog}: {message}")


DESCRIPTION = """\
A laboratory for Linux receive-side packet steering: simulate a host's receive path
(RSS, RPS, RFS, aRFS, flow limit, NAPI, XDP cpumap, AF_XDP) packet by packet for a
named kernel version, and report what the kernel would report."""

EPILOG = """\
start with:  rxlab run                 the built-in default scenario
             rxlab list                built-in scenarios, experiments and profiles
             rxlab COMMAND --help      the options of one command
docs: README.md and docs/ in the source tree"""


def build_parser() -> argparse.ArgumentParser:
    from rxlab import __version__

    parser = _Parser(prog="rxlab", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"rxlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        if importlib.util.find_spec(name) is None:
            continue  # a subcommand still in development on this branch
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    _tolerant_streams()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:  # a bare `rxlab`: the command list, as `git` does
            parser.print_help()
            return 0
        # the first simulation after an install compiles the loop: announced where a run
        # starts (rxlab._cache.announce_compile), after the command has checked its input
        os.environ[NOTICE_ENV] = str(os.getpid())
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a full or closed stdout fails here, not in the exit hook
        return status
    except UsageError as err:
        print(f"rxlab: error: {printable(err)}", file=sys.stderr)
        return 2
    except OutputError as err:  # no space, read-only: the machine, not the input
        print(f"rxlab: error: {printable(err)}", file=sys.stderr)
        return 1
    except ConservationError as err:
        print(f"rxlab: internal error: {printable(err)}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # `rxlab ... | head`: the reader left, not an error
        return _reader_left()
    except SystemExit as e:
        if _rich_broken_pipe(e):  # rich exits 1 when the reader left; rxlab exits 0
            return _reader_left()
        raise
    except OSError as err:
        # every file rxlab writes names its path (rxlab.outfiles); a nameless one is stdout
        if err.errno in STDOUT_ERRNOS and err.filename is None:
            from rxlab.outfiles import stdout_failed

            print(f"rxlab: error: {stdout_failed(err)}", file=sys.stderr)
            return 1
        raise
    except KeyboardInterrupt:
        print("rxlab: interrupted", file=sys.stderr)
        return 130


def _tolerant_streams() -> None:
    """What the terminal's encoding cannot show (PYTHONIOENCODING=ascii, a name with a
    lone surrogate) is written as a backslash escape instead of raising
    UnicodeEncodeError halfway through a table."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):  # not a TextIOWrapper
            stream.reconfigure(errors="backslashreplace")


STDOUT_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG)


def _reader_left() -> int:
    """Quiet from here on: stdout to /dev/null so the exit flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.close()
    return 0


def _rich_broken_pipe(e: SystemExit) -> bool:
    """rich's Console.on_broken_pipe raised this SystemExit (the pipe's reader left)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "on_broken_pipe"


def entry() -> None:
    """The console script (and ``python -m rxlab.cli.main``): main, then exit.

    When a command loaded pyarrow (sweep, report), its C++ thread pools are still alive
    at interpreter exit, and a worker's std::thread destructor there aborts the process
    now and then after all output was written ("terminate called without an active
    exception", exit -6; apache/arrow#34314; reading on one thread made it rarer, not
    gone). Such a process leaves with os._exit once its streams are flushed and no child
    process is left, skipping only the static destructors that abort."""
    status = main()
    if "pyarrow" in sys.modules:
        import multiprocessing

        if not multiprocessing.active_children():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()
