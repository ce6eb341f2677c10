"""``rxlab explain drops|latency``: attribute a run's drops and latency tail to causes.

Each cause is a place in the receive path (an rx queue, a CPU's backlog, a flow-limit
table, a socket), the flows that reach it with their share of its packets, what else
runs on its CPU, and the settings that would move it.
"""
