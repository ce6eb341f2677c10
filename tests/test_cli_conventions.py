"""The command line follows the conventions of the ecosystem: --version, a bare
``rxlab`` lists the commands, help written for users, no tracker talk in output."""

from __future__ import annotations

import pytest

from rxlab import __version__
from rxlab.cli.main import COMMANDS, main


def test_version(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    assert capsys.readouterr().out.strip() == f"rxlab {__version__}"


def test_bare_rxlab_lists_every_command(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for mod in COMMANDS:
        name = mod.rsplit(".", 1)[1].removesuffix("_cmd").replace("kcheck", "kernel-check")
        assert f"\n    {name}" in out, name
    assert "``" not in out and "console script" not in out  # no developer docstring


def test_unknown_option_is_one_line_without_doubled_prefix(capsys):
    assert main(["--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rxlab: error: unrecognized"), err


def test_bench_checks_name_targets_not_tracker_issues():
    from rxlab.bench import runner

    text = open(runner.__file__).read()
    assert "issue" not in text.lower()


def test_every_reproduction_runs_and_names_the_kernel_asked_for():
    from rxlab.repro import EXPERIMENTS
    from rxlab.repro.base import kernels_of

    for name, mod in EXPERIMENTS.items():
        assert kernels_of(mod.cases(True, "6.12")) == ["6.12"], name
        assert len(kernels_of(mod.cases(True, None))) == 1, name  # a default is named


def test_explain_arfs_defaults_to_the_reports_setup(capsys):
    import json

    assert main(["explain", "arfs", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["flows"], out["queues"], out["tables"][0]["rps_flow_cnt"]) == (16384, 144, 512)


def _options(cmd: str) -> dict:
    """Option string -> argparse action of one subcommand."""
    import argparse

    from rxlab.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in sub.choices[cmd]._actions for s in a.option_strings}


@pytest.mark.parametrize("cmd", ["run", "compare", "reproduce", "tune", "sweep"])
def test_jobs_and_seeds_mean_the_same_in_every_command(cmd):
    """--jobs N: N worker processes; --seeds N: an integer count of traffic seeds."""
    opts = _options(cmd)
    jobs = opts["--jobs"]
    assert jobs.type is int and "-j" in jobs.option_strings
    assert "process" in jobs.help and "replication" not in jobs.help
    if cmd != "sweep":  # a sweep's replications are in its file
        seeds = opts["--seeds"]
        assert seeds.type is int and seeds.metavar == "N"
