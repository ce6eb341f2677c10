"""Traffic: the scenario's ``traffic:`` schema, the flow table and the packet stream."""

from rxlab.traffic.flows import FlowTable, build_flows
from rxlab.traffic.spec import GroupSpec, TrafficSpec
from rxlab.traffic.stream import Chunk, PacketStream

__all__ = ["Chunk", "FlowTable", "GroupSpec", "PacketStream", "TrafficSpec", "build_flows"]
