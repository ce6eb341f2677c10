"""``rxlab explain arfs``: the seed's setup by default, and the ice and mlx5 filter paths
with the kernel functions they come from."""

from __future__ import annotations

import json

from rxlab.cli.main import main
from rxlab.repro import arfs_flow_match


def explain(capsys, *args):
    rc = main(["explain", "arfs", *args])
    out = capsys.readouterr()
    assert rc == 0 and not out.err
    return out.out


def test_defaults_are_the_reproductions_setup(capsys):
    data = json.loads(explain(capsys, "--json"))
    # seed 000: 16,384 netperf sessions on a 144-queue ice port, rps_flow_cnt 512
    assert (data["flows"], data["queues"]) == (16_384, 144)
    assert data["tables"][0]["rps_flow_cnt"] == 512
    # the same kernel (flow_id rule) the reproduction runs by default
    (_, params, _), *_ = arfs_flow_match.cases(True, None)
    assert data["kernel"] == params["kernel"]


def test_driver_models_cite_the_kernel(capsys):
    data = json.loads(explain(capsys, "--json"))
    drivers = {d["driver"]: d for d in data["drivers"]}
    assert set(drivers) == {"ice", "mlx5"}
    for d in drivers.values():
        assert [s["step"] for s in d["steps"]][:5] == ["lookup", "skip", "update", "add",
                                                      "program"]
        assert all(s["kernel"].startswith("drivers/net/ethernet/") for s in d["steps"])
    ice = drivers["ice"]
    assert "arfs_lock" in ice["lock"] and "1024" in ice["table"]
    assert any("ice_rx_flow_steer" in s["kernel"] for s in ice["steps"])
    assert any("ice_sync_arfs_fltrs" in s["kernel"] for s in ice["steps"])
    mlx5 = drivers["mlx5"]
    assert any("arfs_handle_work" in s["kernel"] for s in mlx5["steps"])
    assert "workqueue" in " ".join(s["does"] for s in mlx5["steps"])
    # every model the scenario accepts is explained
    from typing import get_args

    from rxlab.scenario import Arfs

    accepted = set(get_args(Arfs.model_fields["model"].annotation))
    assert accepted == {m for d in drivers.values() for m in d["models"]}


def test_table_output_lists_both_drivers(capsys):
    out = explain(capsys)
    assert "16,384 flows, 144 queues" in out
    assert "ice (nic.arfs.model" in out and "mlx5 (nic.arfs.model" in out
