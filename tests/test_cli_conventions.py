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
