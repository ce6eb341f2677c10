"""Each function of the event loop is compiled with exactly one signature.

numba compiles a function once per distinct argument types (and once per literal value
where it specialises on literals): a second signature is a second copy of the function
and of everything it inlines, paid in compile time and memory on every cold start.
The loop is compiled from an empty cache in a child process (a warm cache loads only
the loop itself, so its callees would show no signatures at all; the shared cache also
holds the signatures tests give when they call a mechanism directly).
"""

import json
import os
import subprocess
import sys

LOOP_MODULES = (
    "rxlab.engine.core", "rxlab.engine.rng",
    "rxlab.kernel.accounting", "rxlab.kernel.backlog", "rxlab.kernel.flow_limit",
    "rxlab.kernel.hashfn", "rxlab.kernel.napi", "rxlab.kernel.nic_rx", "rxlab.kernel.rfs",
    "rxlab.kernel.rps",
    "rxlab.kernel.rx_loop", "rxlab.kernel.sched", "rxlab.kernel.socket",
    "rxlab.nic.arfs", "rxlab.nic.arfs_steer",
    "rxlab.xdp.cpumap", "rxlab.xdp.program", "rxlab.xdp.xsk_rx",
)

CHILD = """
import importlib, json, sys
import rxlab
from numba.core.registry import CPUDispatcher
rxlab.simulate("cpumap")
out = {}
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    for attr, fn in vars(mod).items():
        if isinstance(fn, CPUDispatcher) and fn.__module__ == name:
            out[name + "." + attr] = [str(sig) for sig in fn.signatures]
print(json.dumps(out))
"""


def test_each_loop_function_compiles_with_one_signature(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", CHILD, *LOOP_MODULES], env=env, check=True,
                         capture_output=True, text=True)
    sigs = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(sigs["rxlab.kernel.rx_loop.run"]) == 1
    assert len(sigs["rxlab.kernel.rps.get_rps_cpu"]) == 1  # compiled on its own: seen here
    many = {name: s for name, s in sigs.items() if len(s) > 1}
    assert not many, many
