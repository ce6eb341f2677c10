"""The skb's software flow hash: the flow dissector and SipHash."""

from rxlab.mechanisms.base import Mechanism, Stage

FLOW_HASH = Mechanism(
    name="flow_hash",
    kernel="__skb_get_hash_net, __flow_hash_from_keys (net/core/flow_dissector.c)",
    code=("kernel/flow_hash.py",),
    stages=(Stage("sw_hash", "__skb_get_hash (net/core/flow_dissector.c): dissect the "
                             "headers and SipHash them, for an skb without a hardware "
                             "hash"),),
    flags=("siphash_flow_hash",),
    knobs=("kernel.hashrnd",),
)
