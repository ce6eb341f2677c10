"""Imported once by the forkserver that the local worker processes of ``rxlab.parallel``
are forked from.

First it asks for SIGKILL when its parent, the driver, dies (the workers ask the
same of the forkserver), so a killed driver leaves no process behind. Then it loads
(or, with a cold cache, compiles) the jitted loop once by simulating a tiny scenario,
so every worker starts with the compiled code in memory: no per-worker cache load, and
never N simultaneous numba compiles (each about a minute and a half and 0.8 GB) when the cache
is cold. A failure here only means the workers load the code themselves.
"""

import os

from rxlab.parallel import DRIVER_ENV, die_with_parent

die_with_parent()
if os.environ.get(DRIVER_ENV, str(os.getppid())) != str(os.getppid()):
    os._exit(0)  # the driver died before the line above: no signal will come

try:
    from rxlab.simulate import simulate

    simulate("default", duration=0.001)
except Exception:  # noqa: BLE001 - warm-up only; the workers report real errors
    pass
