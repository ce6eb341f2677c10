"""Queueing theory for NAPI receive paths, and an event simulation to check it.

Nothing here uses rxlab: these are the references the model is compared against.

M/G/1 with setup times
======================
Poisson arrivals (rate lam), one FIFO server, service times S (i.i.d., general). When a
customer arrives to an empty system the server first spends a setup time D (i.i.d.,
independent of S) before it serves anyone; customers arriving meanwhile queue behind.
The server then works until the system is empty. This is Welch's "generalized M/G/1 in
which the first customer of each busy period receives exceptional service" with the
first service S0 = D + S (P. D. Welch, Operations Research 12(5):736-752, 1964), known as
the M/G/1 queue with setup times (H. Takagi, Queueing Analysis vol. 1, North-Holland
1991, sec. 2.3). With rho = lam E[S] < 1:

  packets per busy period  E[N] = (1 + lam E[D]) / (1 - rho)
  mean wait                E[W] = lam E[S^2] / (2 (1 - rho))
                                  + (2 E[D] + lam E[D^2]) / (2 (1 + lam E[D]))
  mean sojourn             E[T] = E[W] + E[S]

where W is the time from arrival to the start of the customer's own service (the first
customer of a busy period waits the whole setup). D = 0 gives Pollaczek-Khinchine.

Derivation (mean workload, PASTA). Give the first customer of a busy period the work
X = D + S and every other customer X = S. The unfinished work V(t) (remaining setup and
service of everyone present) then decreases at rate 1 while positive, and under FIFO a
customer arriving to a busy system starts service after exactly the work it finds, so
its Welch wait is Wq = V(arrival) (0 for the first). Over one cycle (idle period, mean
1/lam, plus busy period) each customer adds X Wq + X^2/2 to the integral of V, and X is
independent of Wq. A cycle serves E[N] customers, lasts E[N]/lam, and its first customer
has Wq = 0, so the time-average work is
  E[V] = (lam / E[N]) (E[X0^2]/2 + (E[N] - 1) E[S^2]/2 + E[S] E[N] E[Wq]).
PASTA gives E[Wq] = E[V]; solving, with E[X0^2] = E[D^2] + 2 E[D] E[S] + E[S^2],
  E[Wq] = lam E[S^2] / (2 (1 - rho)) + lam (E[D^2] + 2 E[D] E[S]) / (2 (1 + lam E[D])).
The first customer also waits D, and an arrival finds the system empty with probability
P0 = 1 / E[N] (idle time 1/lam per cycle of length E[N]/lam), so E[W] = E[Wq] + P0 E[D],
which simplifies to the formula above. E[N] follows from E[B] = (E[D] + E[S]) / (1 - rho)
(the busy period an initial work D + S generates) and E[B] = E[D] + E[N] E[S].

Mapping to a NAPI driver that cleans until the ring is empty
============================================================
A packet that finds the queue's interrupt enabled (no poll scheduled or running) starts
a busy period: the interrupt reaches the CPU after the interrupt latency (plus any fixed
moderation delay), the hard interrupt handler runs, NET_RX_SOFTIRQ calls the driver's
poll, and the poll pays its fixed cost before it reads the first descriptor. Then the
poll takes descriptors one by one, each costing the per-packet work, and re-reads the
next descriptor after each one (ice_clean_rx_irq, i40e_clean_rx_irq, ixgbe_clean_rx_irq,
mlx5e_poll_rx_cq), so packets that land while it runs are taken in the same poll. It
ends when it finds an unwritten descriptor, i.e. when the queue is empty, and
napi_complete_done re-enables the interrupt. If the budget never binds, that is one
poll per busy period:

  setup D     = irq latency (+ fixed moderation delay) + hard interrupt cost
                + fixed cost of one NAPI poll
  service S   = CPU time per packet inside the poll
  rho         = lam E[S]          (the setup is not work per packet)
  polls/packet = 1 / E[N] = (1 - rho) / (1 + lam E[D])

In rxlab's stages, for one queue on one CPU, no RPS, the reader on another CPU:
  D = irq_latency + nic.rx_usecs   (Params.irq_delay_ns: ingest -> EV_IRQ)
      + hardirq                    (interrupt() adds it as irq_debt; dispatch() charges
                                    it before the NAPI segment starts on an idle CPU)
      + napi_poll                  (napi.napi_poll, once per poll)
  S = driver_rx + gro              (driver_poll, per packet)
      + stack_rx + socket_enqueue  (netif_receive_skb_core, per packet)
  latency_ns.to_socket (mean) = E[W] + E[S]: sock_queue_tail stamps the packet after
  socket_enqueue, from its ring arrival time; the queue's ``polls`` in the result
  (q_polls, one per driver_poll call) over its delivered packets is polls per packet.
  A repoll after a full NAPI weight costs napi_poll again (``repoll_cost`` below),
  without an interrupt.

Only CPU time delays the next packet's service; the interrupt latency is idle time but
still delays the first packet, so it belongs to D all the same. The formula assumes the
CPU does nothing else (no other queue, thread or softirq on it) and that the hard
interrupt and the poll's fixed cost are paid before the first packet's work. A driver
that reads the ring's count once at the start of the poll (mvpp2_rx) is not this queue:
packets arriving during its poll wait for another interrupt.

When a poll reaches the NAPI weight it is polled again (another fixed cost, no
interrupt); ``simulate_napi`` models that with ``weight`` and ``repoll_cost`` so a test
can see how far the budget moves the figures from the formula.
"""

from __future__ import annotations

import math

import numpy as np


def mg1_setup(lam: float, es: float, es2: float, ed: float, ed2: float | None = None
              ) -> dict[str, float]:
    """M/G/1 with setup times: mean wait, sojourn, packets and polls per busy period.

    ``es``/``es2``: first two moments of the service time; ``ed``/``ed2``: of the setup
    (``ed2`` defaults to ``ed**2``, a fixed setup). Units are whatever ``1/lam`` is in."""
    ed2 = ed * ed if ed2 is None else ed2
    rho = lam * es
    if not 0 <= rho < 1:
        raise ValueError(f"rho = {rho} must be in [0, 1)")
    wait = lam * es2 / (2 * (1 - rho)) + (2 * ed + lam * ed2) / (2 * (1 + lam * ed))
    n_busy = (1 + lam * ed) / (1 - rho)
    return {"rho": rho, "wait": wait, "sojourn": wait + es, "per_busy_period": n_busy,
            "polls_per_packet": 1 / n_busy, "p_idle_arrival": 1 / n_busy}


def md1_wait(lam: float, s: float) -> float:
    """M/D/1 mean wait in queue (Pollaczek-Khinchine): lam S^2 / (2 (1 - rho))."""
    rho = lam * s
    if not 0 <= rho < 1:
        raise ValueError(f"rho = {rho} must be in [0, 1)")
    return lam * s * s / (2 * (1 - rho))


def simulate_napi(lam: float, service, setup, n: int, seed: int = 1,
                  weight: int | None = None, repoll_cost: float = 0.0) -> dict[str, float]:
    """Event simulation of one NAPI queue whose poll cleans until the ring is empty.

    Poisson arrivals at ``lam``; ``service`` and ``setup`` are each a number (fixed) or a
    callable ``(rng, n) -> array`` of draws: a service time per packet, a setup per busy
    period, paid before its first packet. With ``weight``, a poll that has taken
    ``weight`` packets ends and the queue is polled again at once for ``repoll_cost``
    (no interrupt); the new poll takes what has arrived by the end of that cost, or
    completes empty. The first tenth of the packets is a warm-up and not counted."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0 / lam, n)).tolist()
    svc = (np.full(n, float(service)) if not callable(service) else
           np.asarray(service(rng, n), float)).tolist()
    setups = (np.full(n, float(setup)) if not callable(setup) else
              np.asarray(setup(rng, n), float)).tolist()
    busy = 0
    skip = n // 10
    free = -math.inf  # when the server has finished all work so far
    count = 0  # packets taken by the current poll
    wait_sum = 0.0
    polls = 0
    for i in range(n):
        a = arr[i]
        if weight is not None and count == weight:
            free += repoll_cost  # repoll: its ring check happens after its fixed cost
            count = 0
            polls += i >= skip
        if a > free:  # the poll found the ring empty: interrupt, new busy period
            start = a + setups[busy]
            busy += 1
            count = 0
            polls += i >= skip
        else:
            start = free
        count += 1
        free = start + svc[i]
        if i >= skip:
            wait_sum += start - a
    m = n - skip
    return {"wait": wait_sum / m, "polls_per_packet": polls / m, "packets": m}
