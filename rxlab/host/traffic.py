"""UDP sender and receiver for the kernel checks; standard library only.

Run as a script inside a namespace (``ip netns exec NS python traffic.py ...``) so that
starting it does not import rxlab (numba). Both pin themselves to one CPU.

    traffic.py send --cpu 0 --dst 10.77.0.2 --port 9000 --sports 40000,40001 \
                    --weights 8,1 --duration 1.0 [--pps 50000]
    traffic.py recv --cpu 1 --peer 10.77.0.1 --port 9000 --sports 40000,40001 \
                    [--migrate-at 0.6 --migrate-to 0] [--nap 0.001]

Sender: one socket per flow, bound to its source port and ``connect()``ed; rounds of
``weights[i]`` sends per flow, 64-byte payloads, until the duration is up; with
``--pps`` it sleeps whenever it is ahead of that total rate by more than 0.5 ms, so it
sends in bursts at its full rate. Prints ``{"sent": {port: n}, "seconds": s, "rusage":
{"utime", "stime"}, "sleeps": n, "slept": s}`` (its own CPU time while sending, from
getrusage; how often and how long it slept).

Receiver: one socket per flow bound to the port (SO_REUSEADDR) and ``connect()``ed to
(peer, source port): RFS and SO_INCOMING_CPU need connected UDP sockets
(``__udp_queue_rcv_skb()`` in net/ipv4/udp.c saves ``sk_rxhash`` and ``sk_incoming_cpu``
only when ``inet_daddr`` is set). Prints ``ready`` once bound, ``migrated`` when it moved
itself, and at EOF on stdin (or after ``--max-seconds``) a JSON line: per port the
packets received and the ``SO_INCOMING_CPU`` samples (every 16th packet), per phase
(0 before the migration, 1 after it; samples in the first ``--settle`` seconds of a phase
are not kept), and its own CPU time from ``ready`` to the end (``rusage``). With
``--nap S`` it does not wait on its sockets: it sleeps S seconds on a timer, then reads
what is queued, so the softirq that queues a packet finds no sleeper on the socket and
wakes nobody (``sock_def_readable()`` in net/core/sock.c checks
``skwq_has_sleeper()``): the receive CPU's time is the receive path's alone. With
``--busy-poll US`` (one port) it reads with blocking ``recv`` calls on a socket with
``SO_BUSY_POLL`` US, so an empty socket busy-polls its NAPI before the read sleeps
(``__skb_recv_udp`` -> ``sk_busy_loop``); ``SO_RCVTIMEO`` of 50 ms lets it look at stdin.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import selectors
import socket
import sys
import time

SO_INCOMING_CPU = 49
SO_RCVBUFFORCE = 33
SO_BUSY_POLL = 46  # include/uapi/asm-generic/socket.h


def _ports(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _rusage() -> dict[str, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    # nvcsw: voluntary context switches, i.e. how often the process slept and was woken
    return {"utime": r.ru_utime, "stime": r.ru_stime, "nvcsw": r.ru_nvcsw}


def _since(r0: dict[str, float]) -> dict[str, float]:
    r1 = _rusage()
    return {k: r1[k] - r0[k] for k in r0}


def send(args) -> None:
    os.sched_setaffinity(0, {args.cpu})
    sports = _ports(args.sports)
    weights = _ports(args.weights) if args.weights else [1] * len(sports)
    socks = []
    for sp in sports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.src, sp))
        s.connect((args.dst, args.port))
        socks.append(s)
    plan = [(i, s.send) for i, (s, w) in enumerate(zip(socks, weights, strict=True))
            for _ in range(w)]
    sent = [0] * len(socks)
    payload = b"x" * 64
    r0 = _rusage()
    end = time.monotonic() + args.duration
    t0 = time.monotonic()
    rounds = sleeps = 0
    slept = 0.0
    per_round = len(plan) / args.pps if args.pps else 0.0
    while True:
        for i, fn in plan:
            try:
                fn(payload)
                sent[i] += 1
            except OSError:  # ENOBUFS and the like: not sent
                pass
        rounds += 1
        if per_round:
            ahead = t0 + rounds * per_round - time.monotonic()
            if ahead > 0.0005:
                t_s = time.monotonic()
                time.sleep(ahead)
                slept += time.monotonic() - t_s
                sleeps += 1
        if rounds & 15 == 0 and time.monotonic() >= end:
            break
    secs = time.monotonic() - t0
    print(json.dumps({"sent": {str(p): n for p, n in zip(sports, sent, strict=True)},
                      "seconds": secs, "rusage": _since(r0), "sleeps": sleeps,
                      "slept": slept}), flush=True)


def recv(args) -> None:
    os.sched_setaffinity(0, {args.cpu})
    sports = _ports(args.sports)
    sel = selectors.DefaultSelector()
    socks = {}
    for sp in sports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind((args.addr, args.port))
        s.connect((args.peer, sp))
        if args.busy_poll is not None:
            s.setsockopt(socket.SOL_SOCKET, SO_BUSY_POLL, args.busy_poll)
            # a blocking fd (Python's own timeouts would poll() it non-blocking); the
            # kernel's receive timeout (struct timeval: 0 s, 50000 us) wakes the read to
            # look at stdin
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                         (0).to_bytes(8, sys.byteorder) + (50_000).to_bytes(8, sys.byteorder))
            s.setblocking(True)
        else:
            s.setblocking(False)
        socks[s.fileno()] = (s, sp)
        sel.register(s, selectors.EVENT_READ, sp)
    sel.register(sys.stdin, selectors.EVENT_READ, None)
    received = {sp: 0 for sp in sports}
    # samples[phase][port][cpu] = count
    samples = [{sp: {} for sp in sports}, {sp: {} for sp in sports}]
    print("ready", flush=True)
    r0 = _rusage()
    t0 = time.monotonic()
    phase, phase_t = 0, t0
    deadline = t0 + args.max_seconds
    migrate_at = t0 + args.migrate_at if args.migrate_at is not None else None
    running = True
    while running:
        now = time.monotonic()
        if now >= deadline:
            break
        if migrate_at is not None and phase == 0 and now >= migrate_at:
            os.sched_setaffinity(0, {args.migrate_to})
            phase, phase_t = 1, time.monotonic()
            print("migrated", flush=True)
        keep = now - phase_t >= args.settle
        if args.busy_poll is not None:
            ready = [(k, "blocking") for k in sel.get_map().values() if k.data is not None]
            if select.select([sys.stdin], [], [], 0)[0]:
                ready.append((sel.get_key(sys.stdin), None))
        elif args.nap:
            time.sleep(args.nap)
            ready = [(k, None) for k in sel.get_map().values() if k.data is not None]
            if select.select([sys.stdin], [], [], 0)[0]:
                ready.append((sel.get_key(sys.stdin), None))
        else:
            ready = sel.select(timeout=0.05)
        for key, _ev in ready:
            sp = key.data
            if sp is None:
                if not sys.stdin.readline():
                    running = False  # EOF: the parent is done sending
                continue
            s = key.fileobj
            n = 0
            while n < 256:
                try:
                    s.recv(2048)
                except BlockingIOError:  # non-blocking: empty; blocking: SO_RCVTIMEO
                    break
                n += 1
                received[sp] += 1
                if keep and received[sp] & 15 == 0:
                    c = s.getsockopt(socket.SOL_SOCKET, SO_INCOMING_CPU)
                    d = samples[phase][sp]
                    d[c] = d.get(c, 0) + 1
    # drain what is queued (counts only)
    for s, sp in socks.values():
        s.setblocking(False)
        while True:
            try:
                s.recv(2048)
            except (BlockingIOError, OSError):
                break
            received[sp] += 1
    out = {"received": {str(k): v for k, v in received.items()}, "rusage": _since(r0),
           "samples": [{str(p): {str(c): n for c, n in d.items()} for p, d in ph.items()}
                       for ph in samples]}
    print(json.dumps(out), flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("--cpu", type=int, default=0)
    s.add_argument("--src", default="10.77.0.1")
    s.add_argument("--dst", default="10.77.0.2")
    s.add_argument("--port", type=int, default=9000)
    s.add_argument("--sports", required=True)
    s.add_argument("--weights", default="")
    s.add_argument("--duration", type=float, default=1.0)
    s.add_argument("--pps", type=float, default=0.0)
    r = sub.add_parser("recv")
    r.add_argument("--cpu", type=int, default=1)
    r.add_argument("--addr", default="10.77.0.2")
    r.add_argument("--peer", default="10.77.0.1")
    r.add_argument("--port", type=int, default=9000)
    r.add_argument("--sports", required=True)
    r.add_argument("--migrate-at", type=float, default=None)
    r.add_argument("--migrate-to", type=int, default=0)
    r.add_argument("--settle", type=float, default=0.0)
    r.add_argument("--max-seconds", type=float, default=20.0)
    r.add_argument("--nap", type=float, default=0.0)
    r.add_argument("--busy-poll", type=int, default=None)
    args = ap.parse_args(argv)
    (send if args.mode == "send" else recv)(args)


if __name__ == "__main__":
    main()
