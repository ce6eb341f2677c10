"""Imported once by the forkserver that local sweep workers are forked from.

It loads (or, with a cold cache, compiles) the jitted loop once by simulating a tiny
scenario, so every worker starts with the compiled code in memory: no per-worker cache
load, and never N simultaneous numba compiles (each about a minute and over a GB) when
the cache is cold. A failure here only means the workers load the code themselves.
"""

try:
    from rxlab.simulate import simulate

    simulate("default", duration=0.001)
except Exception:  # noqa: BLE001 - warm-up only; the workers report real errors
    pass
