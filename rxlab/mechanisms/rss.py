"""RSS: the Toeplitz hash, the indirection table and its contexts, n-tuple rules."""

from rxlab.mechanisms.base import Mechanism

RSS = Mechanism(
    name="rss",
    kernel="the NIC's RSS as the Toeplitz selftest computes it "
           "(tools/testing/selftests/drivers/net/hw/toeplitz.c), ethtool_rxfh_indir_default "
           "(include/linux/ethtool.h), ETHTOOL_SRXCLSRLINS rules (net/ethtool/ioctl.c)",
    code=("nic/toeplitz.py", "nic/indirection.py"),
    knobs=("nic.rss", "nic.ntuple", "nic.rxhash"),
    output=("steering", "flows_by_group"),
)
