"""The loop's profile (rxlab.kernel.profile, benchmarks/profile.py): its sites line up
with the event kinds, and with RXLAB_PROFILE unset it compiles to nothing."""

import os

from rxlab.kernel import events
from rxlab.kernel.profile import P_EV0, SITES


def test_an_event_kind_is_counted_under_its_own_name():
    kinds = {v: k for k, v in vars(events).items() if k.startswith("EV_") and isinstance(v, int)}
    for value, name in kinds.items():
        assert SITES[P_EV0 + value - 1][0] == name.lower(), name


def test_every_site_is_inside_a_site_that_exists():
    names = {n for n, _ in SITES}
    assert all(inside in names for _, inside in SITES if inside)
    assert [n for n, inside in SITES if not inside] == ["run"]


def test_without_the_switch_nothing_is_counted():
    from rxlab.build import build
    from rxlab.kernel.counters import CNT_OFFERED
    from rxlab.scenario import load_scenario
    from rxlab.simulate import run_model

    assert os.environ.get("RXLAB_PROFILE") != "1"
    m = build(load_scenario("default").model_copy(update={"duration": 0.002}))
    run_model(m)
    assert int(m.st.cnt[CNT_OFFERED]) > 0 and not m.st.prof.any()
