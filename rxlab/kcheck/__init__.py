"""``rxlab kernel-check``: the model against the real kernel, in network namespaces.

Each check sets up the same receive-path configuration twice: on this machine's kernel
(two namespaces joined by a 4-queue veth pair, RPS/RFS/flow_limit, UDP traffic between
them only) and in the simulator, and reports what each did and whether they agree.
See docs/kernel-check.md (setup, checks, safety rules).

    from rxlab.kcheck.runner import run_checks
    report = run_checks(["rps_cpu_choice"])     # rxlab.host.guard.CannotRun when it cannot run here
"""
