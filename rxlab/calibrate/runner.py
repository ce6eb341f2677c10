"""``calibrate``: the safety rules of ``rxlab kernel-check`` around the measurements.

Preflight (``CannotRun``), the model loaded before anything on the host changes, then
under the machine-wide lock kernel-check also takes: left-overs of a killed run of
either tool repaired, the sysctl originals saved to a state file (calibrate writes no
sysctl; the guard is there so a future experiment cannot forget it), its own namespaces
``rxcal_tx``/``rxcal_rx``, ksoftirqd/1 at SCHED_FIFO during the runs (as in the rate
checks of kernel-check: the receive softirq owns CPU 1, as on the model's idle CPU),
and in ``finally`` with signals ignored: child processes
killed, device state reset, sysctls restored, namespaces deleted, the state file removed.
SIGTERM/SIGHUP raise SystemExit and SIGINT KeyboardInterrupt, so ``finally`` runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rxlab.calibrate import measure, profile
from rxlab.host import guard, signals
from rxlab.host.experiment import PROCS, SoftirqTimer
from rxlab.host.lab import CAL_NAMES, Lab


def warm_model(base: str) -> None:
    """Compile or load the simulator (and check the base profile) before the host
    changes."""
    profile.model_softirq_per_packet(base, {}, 10_000)


def calibrate(*, quick: bool = False, base: str = profile.DEFAULT_BASE,
              progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Measure and fit; the profile mapping. ``progress(message, done, total)``."""
    why = guard.cannot_run()
    if why:
        raise guard.CannotRun(why)
    plan = measure.Plan.quick() if quick else measure.Plan()
    total = plan.runs() + 2
    done = [0]

    def step(msg: str) -> None:
        if progress:
            progress(msg, done[0], total)
        done[0] += 1

    step("loading the model (the first run on a machine compiles it: about a minute and a half)")
    warm_model(base)
    from rxlab.host.export import kernel_hz
    hz = kernel_hz()
    t0 = time.monotonic()
    with guard.run_lock(), signals.exit_on_signals():
        notes = guard.repair_leftovers()
        lab = Lab(CAL_NAMES)
        sysctls = guard.Sysctls()
        guard.save_state(sysctls.orig, guard.cal_state_file(), (lab.ns_tx, lab.ns_rx))
        timer = None
        try:
            lab.setup()
            timer = SoftirqTimer()
            with guard.ksoftirqd_fifo(measure.TARGET_CPU):
                meas = measure.measure(lab, timer, plan, step)
        finally:
            with signals.signals_ignored():
                if timer is not None:
                    timer.close()
                problems = cleanup(lab, sysctls)
            if problems:
                print("rxlab calibrate: cleanup problems: " + "; ".join(problems),
                      file=sys.stderr)
    step("fitting")
    prof = profile.build(meas, plan, base, hz=hz["hz"] if hz else None)
    prof["measured"]["seconds"] = round(time.monotonic() - t0, 1)
    prof["measured"]["notes"] = notes
    if progress:
        progress("done", total, total)
    return prof


def cleanup(lab: Lab, sysctls: guard.Sysctls) -> list[str]:
    problems: list[str] = []
    try:
        PROCS.kill_all()
    except Exception as err:  # noqa: BLE001
        problems.append(f"processes: {err}")
    problems += sysctls.restore()
    problems += lab.teardown()
    if not problems:
        guard.clear_state(guard.cal_state_file())
    return problems
