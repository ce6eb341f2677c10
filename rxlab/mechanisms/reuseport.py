"""SO_REUSEPORT: which socket of a group a flow reaches."""

from rxlab.mechanisms.base import Mechanism

REUSEPORT = Mechanism(
    name="reuseport",
    kernel="reuseport_select_sock (net/core/sock_reuseport.c) with udp_ehashfn / "
           "inet_ehashfn / udp6_ehashfn / inet6_ehashfn (net/ipv4/udp.c, "
           "net/ipv4/inet_hashtables.c, net/ipv6/udp.c, net/ipv6/inet6_hashtables.c)",
    code=("reuseport.py",),
    flags=("inet6_hash_whole",),
    knobs=("apps[].spread",),
)
