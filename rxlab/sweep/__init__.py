"""Parameter sweeps: a base scenario, overrides by dotted path, seeds; run locally or on Dask.

``load_sweep(path)`` / ``parse_sweep(mapping)`` validate and expand a sweep into runs;
``run_sweep(sweep, out, jobs=..., scheduler=..., resume=...)`` runs the unfinished ones and
writes the Parquet table, summary and plots; ``write_report(out, dest)`` the HTML page.
See docs/sweeps.md.
"""

from rxlab.sweep.spec import Run, Sweep, load_sweep, parse_sweep, run_id

__all__ = ["Run", "Sweep", "load_sweep", "parse_sweep", "run_id", "run_sweep", "write_report"]


def run_sweep(*args, **kw):
    from rxlab.sweep.runner import run_sweep as _run

    return _run(*args, **kw)


def write_report(*args, **kw):
    from rxlab.sweep.report import write_report as _write

    return _write(*args, **kw)
