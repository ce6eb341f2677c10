"""XDP on the receive path: AF_XDP rings (xsk), the ixgbe zero-copy TX ring and its 2019
double-clean bug (ixgbe_tx), a ring-invariant checker (invariants) and an AF_XDP
forwarding host (afxdp_fwd). Import the submodules directly."""
