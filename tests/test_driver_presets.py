"""nic.driver presets: defaults with citations, scenario values win, bad input is one line.

The expected numbers are the drivers' own constants (Linux 6.19 headers), written here
independently of rxlab/drivers.py's table: ICE_DFLT_NUM_RX_DESC, I40E_HLUT_ARRAY_SIZE,
MVPP22_RSS_TABLE_ENTRIES, mlx5e_rqt_size's max(256, roundup_pow_of_two(2 * channels)).
"""

from __future__ import annotations

import pytest
import yaml
from support.one_line import usage_error

from rxlab import drivers
from rxlab.build import build
from rxlab.cli.main import main
from rxlab.scenario import load_scenario, scenario_from_dict, with_overrides


def _default(**nic) -> dict:
    d = load_scenario("default").model_dump(mode="python", exclude_none=True)
    d["nic"].pop("ring_size", None)  # the built-in scenario writes both out
    d["nic"].get("rss", {}).pop("table_size", None)
    d["nic"].update(nic)
    return d


@pytest.mark.parametrize("name", drivers.DRIVERS)
def test_every_value_is_cited(name):
    p = drivers.load(name)
    cited = [p.ring_size, p.ring_max, p.table_size, p.table_max, p.key_bytes, p.poll,
             p.refill, p.moderation, p.arfs]
    assert all(c.source.strip() for c in cited)
    if name != "generic":  # how the driver polls and refills cites the driver's source
        assert all("drivers/net/" in c.source for c in (p.ring_size, p.poll, p.refill))


@pytest.mark.parametrize("driver,queues,ring,table", [
    ("ice", 4, 2048, 2048), ("i40e", 4, 512, 512), ("ixgbe", 4, 512, 128),
    ("mlx5", 4, 1024, 256), ("mlx5", 200, 1024, 512), ("mvpp2", 4, 1024, 32),
    ("generic", 4, 1024, 128)])
def test_preset_fills_what_the_scenario_leaves_out(driver, queues, ring, table):
    sc = scenario_from_dict(_default(driver=driver, queues=queues))
    assert (sc.nic.ring_size, sc.nic.rss.table_size) == (ring, table)
    assert sc.nic.from_preset() == {"nic.ring_size": ring, "nic.rss.table_size": table}


def test_scenario_value_wins_and_the_result_says_where_values_came_from():
    d = _default(driver="ice", ring_size=512)
    m = build(scenario_from_dict(d))
    drv = m.config["driver"]
    assert m.scenario.nic.ring_size == 512 and m.params.ring_size == 512
    assert drv["from_preset"] == {"nic.rss.table_size": 2048}
    assert drv["name"] == "ice" and drv["poll"] == "clean-until-unwritten"
    assert drv["refill"]["rule"] == "poll-end" and drv["rss_key_bytes"] == 52
    assert len(m.config["indirection_table"]) == 2048


def test_changing_the_driver_brings_its_defaults():
    """A dump leaves preset values out, so --set nic.driver=... is not stuck with the
    first driver's ring and table."""
    sc = scenario_from_dict(_default(driver="ice"))
    sc2 = with_overrides(sc, {"nic.driver": "mvpp2"})
    assert (sc2.nic.ring_size, sc2.nic.rss.table_size) == (1024, 32)
    sc3 = with_overrides(scenario_from_dict(_default(driver="ice", ring_size=4096)),
                         {"nic.driver": "i40e"})
    assert sc3.nic.ring_size == 4096  # written by the user: kept


def test_unknown_driver_lists_the_known_ones():
    msg = usage_error(lambda: scenario_from_dict(_default(driver="e1000x")), "nic.driver",
                    "e1000x")
    assert all(n in msg for n in drivers.DRIVERS)


@pytest.mark.parametrize("driver,size,needle", [
    ("ice", 4096, "2048"), ("i40e", 1024, "512"), ("mvpp2", 64, "32"),
    ("ice", 100, "power of two")])
def test_impossible_table_size(driver, size, needle):
    d = _default(driver=driver)
    d["nic"]["rss"] = {"table_size": size}
    usage_error(lambda: scenario_from_dict(d), "nic.rss.table_size", needle)


def test_ring_larger_than_the_driver_allows():
    usage_error(lambda: scenario_from_dict(_default(driver="mvpp2", ring_size=4096)),
              "nic.ring_size", "2048")


@pytest.mark.parametrize("driver,arfs,needle", [
    ("i40e", "ice-tuple-match", "no ndo_rx_flow_steer"), ("mlx5", "ice-hash-match", "mlx5")])
def test_arfs_model_must_be_the_drivers(driver, arfs, needle):
    d = _default(driver=driver)
    d["nic"]["arfs"] = {"model": arfs}
    d["kernel"] = {"rps_sock_flow_entries": 4096, "rps_flow_cnt": 256}
    usage_error(lambda: scenario_from_dict(d), "nic.arfs", needle)


def test_key_length_is_the_drivers():
    d = _default(driver="ice")
    d["nic"]["rss"] = {"key": "6d5a" * 20}  # 40 bytes; ice's key is 52
    usage_error(lambda: scenario_from_dict(d), "nic.rss.key", "52")


def _preset_file(tmp_path, **change) -> str:
    data = drivers.load("ixgbe").model_dump()
    data.update(change)
    path = tmp_path / "mydrv.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_preset_file_is_used(tmp_path):
    f = _preset_file(tmp_path, name="mydrv", ring_size={"value": 256, "source": "a test"})
    sc = scenario_from_dict(_default(driver=f))
    assert sc.nic.ring_size == 256 and sc.nic.preset().name == "mydrv"


@pytest.mark.parametrize("change,needle", [
    ({"ring_size": {"value": "big", "source": "x"}}, "ring_size.value"),
    ({"ring_size": {"value": 2.5, "source": "x"}}, "ring_size.value"),
    ({"poll": {"value": "sometimes", "source": "x"}}, "poll.value"),
    ({"ring_max": {"value": 9000}}, "ring_max.source")])
def test_bad_preset_file_is_one_line_exit_2(tmp_path, capsys, change, needle):
    f = _preset_file(tmp_path, **change)
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump(_default(driver=f)))
    assert main(["run", str(s), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rxlab: error:"), err
    assert "nic.driver" in err[0] and needle in err[0], err


def test_unknown_driver_exit_2(tmp_path, capsys):
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump(_default(driver="bnx3")))
    assert main(["run", str(s), "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nic.driver" in err[0] and "ice" in err[0], err
