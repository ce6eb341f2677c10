"""Driver presets: what ``nic.driver`` means (defaults read from the Linux 6.19 drivers).

A preset gives the values a driver uses when nobody changes them with ethtool: RX ring
size and its maximum, indirection table size and its maximum, RSS key length, how a NAPI
poll ends, when buffers go back to the NIC, interrupt moderation and the aRFS filter
model. ``nic.ring_size`` and ``nic.rss.table_size`` left out of a scenario take the
preset's value; a value the scenario gives wins, and the run's ``config.driver`` says
which values came from the preset. The other fields are reported in the run's config;
see docs/model.md, "Driver RX polls", for what the model does with them.

``nic.driver`` is a built-in name or a YAML file with the same keys (one preset, every
value with its ``source``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rxlab.errors import UsageError
from rxlab.inputs import parse_yaml, read_text

T = TypeVar("T")
ICE = "drivers/net/ethernet/intel/ice"
I40E = "drivers/net/ethernet/intel/i40e"
IXGBE = "drivers/net/ethernet/intel/ixgbe"
MLX5 = "drivers/net/ethernet/mellanox/mlx5/core"
MVPP2 = "drivers/net/ethernet/marvell/mvpp2"


class _Fixed(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class Cited(_Fixed, Generic[T]):
    value: T
    source: str = Field(min_length=1)


class Refill(_Fixed):
    """When consumed RX buffers go back to the NIC (the tail or doorbell write)."""

    rule: Literal["per-packet", "poll-end", "threshold", "every"]
    # threshold: at least this many consumed (0: none); a fraction of the ring if < 1
    batch: Annotated[float, Field(ge=0)] = 0
    where: Literal["in-loop", "after-loop", "none"] = "none"
    # descriptors the driver never hands the NIC: the Intel drivers fill count - 1
    # (*_DESC_UNUSED keeps next_to_use one behind next_to_clean)
    keep_empty: Annotated[int, Field(ge=0, le=64)] = 0
    # the tail register ignores the low bits: the NIC sees the tail rounded down
    tail_align: Annotated[int, Field(ge=1, le=64)] = 1
    source: str = Field(min_length=1)


class Moderation(_Fixed):
    """Interrupt moderation the driver starts with (ethtool -c)."""

    adaptive: bool
    rx_usecs: Annotated[float, Field(ge=0)]  # static value (adaptive off)
    start_usecs: Annotated[float, Field(ge=0)] | None = None  # adaptive: first value
    rx_frames: Annotated[int, Field(ge=0)] = 0  # packet-count trigger, 0: none
    source: str = Field(min_length=1)


class Preset(_Fixed):
    name: str
    description: str = ""
    ring_size: Cited[Annotated[int, Field(ge=1, le=65536)]]
    ring_max: Cited[Annotated[int, Field(ge=1, le=65536)]]
    table_size: Cited[Annotated[int, Field(ge=1, le=65536)]]
    # table = max(table_size, roundup_pow_of_two(per_queue * nic.queues)); 0: fixed size
    table_per_queue: Cited[Annotated[int, Field(ge=0, le=64)]] | None = None
    table_max: Cited[Annotated[int, Field(ge=1, le=65536)]]
    key_bytes: Cited[Annotated[int, Field(ge=0, le=256)]]  # 0: no key (not Toeplitz)
    poll: Cited[Literal["clean-until-unwritten", "count-at-start"]]
    refill: Refill
    moderation: Moderation
    arfs: Cited[list[Literal["ice-hash-match", "ice-tuple-match", "mlx5"]]]


def _c(value, source):
    return {"value": value, "source": source}


_BUILTIN: dict[str, dict[str, Any]] = {
    "ice": {
        "name": "ice",
        "description": "Intel E810 (ice), PF",
        "ring_size": _c(2048, f"{ICE}/ice.h: ICE_DFLT_NUM_RX_DESC (6.19)"),
        "ring_max": _c(8160, f"{ICE}/ice.h: ICE_MAX_NUM_DESC_E810, ice_get_ringparam (6.19)"),
        "table_size": _c(2048, f"{ICE}/ice_lib.c: ice_vsi_set_rss_params, PF LUT "
                               "ICE_LUT_PF_SIZE (6.19); the firmware's capability may "
                               "differ per card (not verified)"),
        "table_max": _c(2048, f"{ICE}/ice_ethtool.c: ice_get_rxfh_indir_size = rss_table_size"
                              " (6.19)"),
        "key_bytes": _c(52, f"{ICE}/ice.h: ICE_VSIQF_HKEY_ARRAY_SIZE = 13 * 4 (6.19)"),
        "poll": _c("clean-until-unwritten", f"{ICE}/ice_txrx.c: ice_clean_rx_irq loops while "
                   "total_rx_pkts < budget and the DD bit at next_to_clean is set (6.19)"),
        "refill": {"rule": "poll-end", "where": "after-loop", "keep_empty": 1, "tail_align": 8,
                   "source": f"{ICE}/ice_txrx.c: ice_clean_rx_irq calls ice_alloc_rx_bufs("
                             "ICE_DESC_UNUSED) once after the loop; ice_release_rx_desc writes"
                             " the tail once, rounded down to a multiple of 8; ICE_DESC_UNUSED"
                             " (ice_txrx.h) keeps one descriptor unused (6.19)"},
        "moderation": {"adaptive": True, "rx_usecs": 50.0, "start_usecs": 8.0,
                       "source": f"{ICE}/ice_lib.c: ice_vsi_alloc_q_vector ITR_DYNAMIC, "
                                 "ICE_DFLT_RX_ITR = ICE_ITR_20K = 50 us; ice_txrx.h DIM "
                                 "profile 1 = 8 us (6.19)"},
        "arfs": _c(["ice-hash-match", "ice-tuple-match"],
                   f"{ICE}/ice_arfs.c: ice_rx_flow_steer (.ndo_rx_flow_steer); n-tuple on by "
                   "default, ice_set_netdev_features (6.19)"),
    },
    "i40e": {
        "name": "i40e",
        "description": "Intel X710/XL710 (i40e), PF",
        "ring_size": _c(512, f"{I40E}/i40e.h: I40E_DEFAULT_NUM_DESCRIPTORS (6.19)"),
        "ring_max": _c(8160, f"{I40E}/i40e.h: I40E_MAX_NUM_DESCRIPTORS_XL710 (other MACs "
                             "I40E_MAX_NUM_DESCRIPTORS = 4096) (6.19)"),
        "table_size": _c(512, f"{I40E}/i40e.h: I40E_HLUT_ARRAY_SIZE = 128 * 4 (6.19)"),
        "table_max": _c(512, f"{I40E}/i40e_ethtool.c: i40e_get_rxfh_indir_size (6.19)"),
        "key_bytes": _c(52, f"{I40E}/i40e.h: I40E_HKEY_ARRAY_SIZE = 13 * 4 (6.19)"),
        "poll": _c("clean-until-unwritten", f"{I40E}/i40e_txrx.c: i40e_clean_rx_irq loops "
                   "while total_rx_packets < budget and the descriptor length is non-zero "
                   "(6.19)"),
        "refill": {"rule": "threshold", "batch": 0.5, "where": "in-loop", "keep_empty": 1,
                   "source": f"{I40E}/i40e_txrx.c: i40e_clean_rx_irq refills when "
                             "cleaned_count >= clean_threshold = ring->count / 2, at the top "
                             "of the loop; no refill after it (6.19; I40E_RX_BUFFER_WRITE "
                             "= 32 is used only by i40e_xsk.c); I40E_DESC_UNUSED "
                             "(i40e_txrx.h) keeps one descriptor unused"},
        "moderation": {"adaptive": True, "rx_usecs": 50.0, "start_usecs": 50.0,
                       "source": f"{I40E}/i40e_main.c: i40e_sw_init, I40E_ITR_RX_DEF = "
                                 "I40E_ITR_20K | I40E_ITR_DYNAMIC; own rule i40e_update_itr"
                                 " (6.19)"},
        "arfs": _c([], f"{I40E}/i40e_main.c: no .ndo_rx_flow_steer (ATR instead) (6.19)"),
    },
    "ixgbe": {
        "name": "ixgbe",
        "description": "Intel 82599/X540/X550 (ixgbe)",
        "ring_size": _c(512, f"{IXGBE}/ixgbe.h: IXGBE_DEFAULT_RXD (6.19)"),
        "ring_max": _c(32768, f"{IXGBE}/ixgbe_ethtool.c: ixgbe_get_max_rxd, X550 family "
                              "(82599/X540: 8192, 82598: 4096) (6.19)"),
        "table_size": _c(128, f"{IXGBE}/ixgbe_main.c: ixgbe_rss_indir_tbl_entries, 82599/"
                              "X540 (X550: 512) (6.19)"),
        "table_max": _c(512, f"{IXGBE}/ixgbe_main.c: ixgbe_rss_indir_tbl_entries, X550 "
                             "(6.19)"),
        "key_bytes": _c(40, f"{IXGBE}/ixgbe.h: IXGBE_RSS_KEY_SIZE (6.19)"),
        "poll": _c("clean-until-unwritten", f"{IXGBE}/ixgbe_main.c: ixgbe_clean_rx_irq loops "
                   "while total_rx_packets < budget and wb.upper.length is non-zero (6.19)"),
        "refill": {"rule": "every", "batch": 16, "where": "in-loop", "keep_empty": 1,
                   "source": f"{IXGBE}/ixgbe_main.c: ixgbe_clean_rx_irq refills when "
                             "cleaned_count >= IXGBE_RX_BUFFER_WRITE (16), at the top of "
                             "the loop; no refill after it; ixgbe_desc_unused (ixgbe.h) "
                             "keeps one descriptor unused (6.19)"},
        "moderation": {"adaptive": True, "rx_usecs": 50.0, "start_usecs": 50.0,
                       "source": f"{IXGBE}/ixgbe_main.c: ixgbe_sw_init rx_itr_setting = 1 "
                                 "(dynamic), ixgbe_lib.c initial EITR IXGBE_20K_ITR (6.19)"},
        "arfs": _c([], f"{IXGBE}/ixgbe_main.c: no .ndo_rx_flow_steer (ATR, n-tuple off) "
                       "(6.19)"),
    },
    "mlx5": {
        "name": "mlx5",
        "description": "NVIDIA ConnectX (mlx5e)",
        "ring_size": _c(1024, f"{MLX5}/en.h: 1 << MLX5E_PARAMS_DEFAULT_LOG_RQ_SIZE (6.19)"),
        "ring_max": _c(8192, f"{MLX5}/en.h: 1 << MLX5E_PARAMS_MAXIMUM_LOG_RQ_SIZE (6.19)"),
        "table_size": _c(256, f"{MLX5}/en/rqt.h: MLX5E_INDIR_MIN_RQT_SIZE (6.19)"),
        "table_per_queue": _c(2, f"{MLX5}/en/rqt.c: mlx5e_rqt_size, max(256, roundup_pow_"
                                 "of_two(channels * MLX5E_UNIFORM_SPREAD_RQT_FACTOR)), factor"
                                 " 2 (6.19); capped by log_max_rqt_size (not verified)"),
        "table_max": _c(65536, "the firmware's 1 << log_max_rqt_size caps it; the card value "
                               "is not verified, so rxlab's own limit applies"),
        "key_bytes": _c(40, f"{MLX5}/en/rss.c: the Toeplitz key is 40 bytes (6.19)"),
        "poll": _c("clean-until-unwritten", f"{MLX5}/en_rx.c: mlx5e_poll_rx_cq takes CQEs "
                   "while work_done < budget and the next CQE's owner bit matches (6.19)"),
        "refill": {"rule": "threshold", "batch": 0.25, "where": "after-loop",
                   "source": f"{MLX5}/en_txrx.c: mlx5e_napi_poll calls rq->post_wqes after "
                             "the CQ loop; en_rx.c mlx5e_post_rx_wqes posts nothing while "
                             "missing < wqe_bulk (about a quarter of the ring, "
                             "mlx5e_rx_compute_wqe_bulk_params), then all that are "
                             "missing; the legacy cyclic RQ (striding RQ, the default on "
                             "ConnectX-5 and later, posts multi-packet WQEs: not modelled) "
                             "(6.19)"},
        "moderation": {"adaptive": True, "rx_usecs": 3.0, "start_usecs": 8.0,
                       "rx_frames": 32,
                       "source": f"{MLX5}/en_main.c: mlx5e_build_nic_params, adaptive-rx on "
                                 "when the card can modify CQ moderation; DIM start 8 us / 128"
                                 " CQEs; static 3 us / 32 (CQE period mode) (6.19)"},
        "arfs": _c(["mlx5"], f"{MLX5}/en_arfs.c: mlx5e_rx_flow_steer (CONFIG_MLX5_EN_ARFS); "
                             "n-tuple off until ethtool -K ntuple on (6.19)"),
    },
    "mvpp2": {
        "name": "mvpp2",
        "description": "Marvell PPv2.2 (mvpp2), e.g. Armada 8040 / MACCHIATObin",
        "ring_size": _c(1024, f"{MVPP2}/mvpp2.h: MVPP2_MAX_RXD_DFLT (6.19)"),
        "ring_max": _c(2048, f"{MVPP2}/mvpp2.h: MVPP2_MAX_RXD_MAX (6.19)"),
        "table_size": _c(32, f"{MVPP2}/mvpp2.h: MVPP22_RSS_TABLE_ENTRIES (6.19)"),
        "table_max": _c(32, f"{MVPP2}/mvpp2_main.c: mvpp2_ethtool_get_rxfh_indir_size "
                            "(6.19)"),
        "key_bytes": _c(0, f"{MVPP2}/mvpp2_cls.c: the RSS hash is CRC32 over the fields, no"
                           " key (6.19)"),
        "poll": _c("count-at-start", f"{MVPP2}/mvpp2_main.c: mvpp2_rx reads "
                   "mvpp2_rxq_received once and processes min(budget, count) (6.19)"),
        "refill": {"rule": "poll-end", "where": "after-loop",
                   "source": f"{MVPP2}/mvpp2_main.c: mvpp2_rx returns the descriptors with "
                             "one mvpp2_rxq_status_update(rx_done, rx_done) after the loop; "
                             "buffers go to the BM pool per packet (mvpp2_rx_refill) (6.19)"},
        "moderation": {"adaptive": False, "rx_usecs": 64.0, "rx_frames": 32,
                       "source": f"{MVPP2}/mvpp2.h: MVPP2_RX_COAL_USEC, MVPP2_RX_COAL_PKTS; "
                                 "mvpp2_port_init (6.19)"},
        "arfs": _c([], f"{MVPP2}/mvpp2_main.c: no .ndo_rx_flow_steer (6.19)"),
    },
    "veth": {
        "name": "veth",
        "description": "virtual Ethernet pair: netif_rx delivery, NAPI only with XDP or GRO",
        "ring_size": _c(256, "drivers/net/veth.c: VETH_RING_SIZE, the ptr_ring a NAPI veth "
                             "polls (6.19)"),
        "ring_max": _c(65536, "rxlab's limit (veth's ring is fixed at VETH_RING_SIZE)"),
        "table_size": _c(128, "rxlab's default: veth has no indirection table (ethtool -x: "
                              "Operation not supported)"),
        "table_max": _c(65536, "rxlab's limit"),
        "key_bytes": _c(0, "drivers/net/veth.c: no get_rxfh (no RSS key) (6.19)"),
        "poll": _c("clean-until-unwritten", "drivers/net/veth.c: veth_xdp_rcv consumes the "
                   "ptr_ring until it is empty or the budget is used (6.19)"),
        "refill": {"rule": "per-packet", "where": "in-loop",
                   "source": "drivers/net/veth.c: __ptr_ring_consume frees the slot as it "
                             "takes the packet (6.19)"},
        "moderation": {"adaptive": False, "rx_usecs": 0.0,
                       "source": "a software device: no interrupt moderation"},
        "arfs": _c([], "drivers/net/veth.c: no .ndo_rx_flow_steer (6.19)"),
    },
    "generic": {
        "name": "generic",
        "description": "no particular driver: rxlab's simple NIC",
        "ring_size": _c(1024, "rxlab's default"),
        "ring_max": _c(65536, "rxlab's limit"),
        "table_size": _c(128, "rxlab's default (ixgbe's size, drivers/net/ethernet/intel/"
                              "ixgbe/ixgbe_main.c: ixgbe_rss_indir_tbl_entries)"),
        "table_max": _c(65536, "rxlab's limit"),
        "key_bytes": _c(40, "the standard Toeplitz key length (NETDEV_RSS_KEY_LEN is 52; "
                            "most drivers use 40)"),
        "poll": _c("clean-until-unwritten", "the common NAPI rule: re-read the next "
                   "descriptor until the budget is used or it is not written yet, as ice, "
                   "i40e, ixgbe, mlx5 (CQEs) and virtio_net (virtnet_receive_packets: "
                   "virtnet_rq_get_buf until NULL) do (6.19)"),
        "refill": {"rule": "per-packet", "where": "in-loop",
                   "source": "rxlab's simple NIC: a descriptor is free again when its "
                             "packet's processing starts"},
        "moderation": {"adaptive": False, "rx_usecs": 0.0,
                       "source": "no moderation: the interrupt follows the first packet "
                                 "after the interrupt latency"},
        "arfs": _c(["ice-hash-match", "ice-tuple-match", "mlx5"],
                   "any modelled ndo_rx_flow_steer"),
    },
}

DRIVERS = tuple(_BUILTIN)


def _fmt(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"] if not str(x).startswith(("function", "json")))
    return f"{loc}: {' '.join(e['msg'].split())}"


def load(ref: str) -> Preset:
    """A built-in driver name, or a YAML file holding one preset -> Preset."""
    if ref in _BUILTIN:
        return Preset.model_validate(_BUILTIN[ref])
    if not ref.endswith((".yaml", ".yml")) or not Path(ref).is_file():
        raise ValueError(f"{ref!r} is not a driver rxlab knows; use one of "
                         f"{', '.join(DRIVERS)} or a preset file (.yaml)")
    try:
        data = parse_yaml(read_text(Path(ref), "driver preset"), ref)
    except UsageError as err:
        raise ValueError(str(err)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{ref}: a driver preset is a mapping (name, ring_size, ...)")
    try:
        return Preset.model_validate(_plain(data))
    except ValidationError as err:
        raise ValueError(f"{ref}: {_fmt(err)}") from None


def _plain(v: Any) -> Any:
    """YAML numbers keep their text in subclasses of int/float; strict mode wants the
    plain types."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    return v


def table_size(p: Preset, queues: int) -> int:
    """The table size the driver starts with for ``queues`` rx queues."""
    size = p.table_size.value
    if p.table_per_queue and p.table_per_queue.value:
        size = max(size, 1 << max(0, (p.table_per_queue.value * queues - 1).bit_length()))
    return min(size, p.table_max.value)


def report(p: Preset, from_preset: dict[str, Any]) -> dict[str, Any]:
    """The run config's ``driver`` section: the values in effect and where they came from."""
    return {
        "name": p.name,
        "from_preset": from_preset,  # scenario fields the preset filled, with their values
        "ring_max": p.ring_max.value,
        "table_max": p.table_max.value,
        "rss_key_bytes": p.key_bytes.value,
        "poll": p.poll.value,
        "refill": p.refill.model_dump(exclude={"source"}),
        "moderation": p.moderation.model_dump(exclude={"source"}),
        "arfs_models": list(p.arfs.value),
        "sources": {
            "ring_size": p.ring_size.source, "table_size": p.table_size.source,
            "poll": p.poll.source, "refill": p.refill.source,
            "moderation": p.moderation.source, "arfs": p.arfs.source,
        },
    }
