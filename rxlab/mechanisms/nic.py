"""The NIC's receive side: rx rings, the packet-rate ceiling, the device interrupt."""

from rxlab.kernel.hashfn import roundup_pow_of_two
from rxlab.kernel.state import NAPI_KTHREAD, POLL_PAUSE, RX_RING, SKB
from rxlab.mechanisms.base import Array, Drop, Event, Mechanism, Stage


def arrays(sc) -> tuple[Array, ...]:
    """Each rx queue's descriptor ring (stored at the next power of two, read
    ``position & ring_mask``) and its record, the paused-poll record, and a kthread record
    per NAPI (the nq queues' napi/DEV-ID, then the CPUs' backlog_napi/N)."""
    nq, ncpu = sc.nic.queues, sc.host.cpus
    return (Array("ring", SKB, (nq, roundup_pow_of_two(sc.nic.ring_size))),
            Array("queue", RX_RING, (nq,)), Array("pause", POLL_PAUSE, (1,)),
            Array("thread", NAPI_KTHREAD, (nq + ncpu,)))


NIC = Mechanism(
    name="nic",
    kernel="the driver's rx ring and MSI-X handler (ice_msix_clean_rings, "
           "drivers/net/ethernet/intel/ice/ice_txrx.c); netif_rx (net/core/dev.c)",
    code=("kernel/nic_rx.py", "kernel/rx_loop.py"),
    stages=(
        Stage("hardirq", "the device's interrupt: irq entry, the driver's MSI-X handler "
                         "(ice_msix_clean_rings -> napi_schedule_irqoff), irq exit"),
        Stage("irq_latency", "descriptor write-back to the handler's entry: MSI-X delivery "
                             "(device and interrupt controller, no kernel code)"),
    ),
    drops=(
        Drop("ring_full", "the NIC's rx ring had no free descriptor (ethtool -S rx_missed / "
                          "rx_no_buffer)"),
        Drop("nic_overrun", "the NIC's packet-rate ceiling was exceeded (rx_fifo_errors)"),
    ),
    events=(Event("IRQ", "arg rx queue: its interrupt reaches the queue's CPU"),),
    knobs=("nic.driver", "nic.queues", "nic.ring_size", "nic.link_gbps", "nic.max_pps",
           "nic.nic_fifo", "nic.irq_affinity", "nic.rx_usecs", "nic.rx_mode"),
    output=("queues", "packets"),
    arrays=arrays,
    sized_by="nic.ring_size",
    state_in="nic",
)
