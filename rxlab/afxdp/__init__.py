"""The AF_XDP forwarding model: an OVS-like application forwarding through one AF_XDP
socket on an ixgbe zero-copy port, with its own time loop and costs (pure Python, not part
of the host simulator's compiled event loop).

Modules: ``xsk`` (UMEM and the four AF_XDP rings), ``ixgbe_tx`` (the zero-copy TX ring and
its two clean variants), ``invariants`` (the ring-invariant checker), ``forward`` (the
forwarding host and :func:`~rxlab.afxdp.forward.run_forwarding`). Import the submodules
directly."""
