"""Benchmarks: rxlab's speed and memory, side by side with a SimPy model and C Toeplitz.

``rxlab bench`` (``rxlab.cli.bench_cmd``) runs everything in one go through
``rxlab.bench.runner.run_bench``. Modules:

- ``scenarios``: the scenarios the benchmark times (flow-limit, the RSS + RPS reference).
- ``engine``: simulated packets per second of ``rxlab.simulate`` (compile excluded).
- ``simpy_ref``: the same RSS + RPS + backlog scenario written with SimPy, fed identical
  inputs, and the agreement check between the two models.
- ``toeplitz_c``: a table-driven Toeplitz in C, compiled with gcc when the benchmark runs.
- ``memory``: peak RSS of a run, measured in a child process.
- ``stats`` / ``replicate``: Student-t confidence intervals and ``rxlab run --jobs N``.
"""
