"""XDP on the host simulator's receive path: the program and its rules, cpumap and the
redirect into an AF_XDP socket (xsk_rx). The AF_XDP forwarding model of the ixgbe TX
double-clean experiment is a separate package, :mod:`rxlab.afxdp`. Import the submodules
directly."""
