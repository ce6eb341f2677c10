"""Toeplitz hashes per second: rxlab's vectorised ``softrss`` against table-driven C.

The C program is written into a temporary folder and compiled with ``gcc -O2`` when the
benchmark runs. It is the usual table-driven form (as in DPDK's ``rte_thash``): a
``[12][256]`` table of u32, built once from the key, and per 12-byte IPv4 4-tuple twelve
lookups and XORs; the width is a compile-time constant so gcc can unroll the loop.
Both sides hash the same kind of input: ``n`` tuples stored contiguously in memory,
one u32 out per tuple, table construction excluded from the timing.

The program has two modes: ``bench N REPS`` (random tuples from a fixed xorshift,
best-of-REPS timing, prints hashes/s and a checksum) and ``hash IN OUT`` (hashes the
rows of a binary file, for the equality test against rxlab).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from rxlab.nic.toeplitz import MS_RSS_KEY, convert_rss_key, softrss

WIDTH = 12  # IPv4 src, dst, sport, dport

C_SOURCE = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WIDTH 12

static uint32_t table[WIDTH][256];

/* table[p][v] = Toeplitz hash of byte v at input position p (other bytes zero) */
static void build_table(const uint8_t *key, int keylen) {
    for (int p = 0; p < WIDTH; p++) {
        for (int v = 0; v < 256; v++) {
            uint32_t h = 0;
            for (int b = 0; b < 8; b++) {
                if (!(v & (0x80 >> b)))
                    continue;
                int bit = 8 * p + b; /* the 32-bit key window starting at this bit */
                uint32_t w = 0;
                for (int k = 0; k < 32; k++) {
                    int kb = bit + k;
                    int kv = kb < 8 * keylen ? (key[kb >> 3] >> (7 - (kb & 7))) & 1 : 0;
                    w = (w << 1) | (uint32_t)kv;
                }
                h ^= w;
            }
            table[p][v] = h;
        }
    }
}

static void hash_rows(const uint8_t *in, uint32_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const uint8_t *d = in + i * WIDTH;
        uint32_t h = 0;
        for (int p = 0; p < WIDTH; p++)
            h ^= table[p][d[p]];
        out[i] = h;
    }
}

static int parse_key(const char *hex, uint8_t *key) {
    int n = 0;
    for (; hex[0] && hex[1] && n < 64; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1)
            return -1;
        key[n++] = (uint8_t)v;
    }
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    uint8_t key[64];
    if (argc < 3) {
        fprintf(stderr, "usage: %s KEYHEX bench N REPS | KEYHEX hash IN OUT\n", argv[0]);
        return 2;
    }
    int keylen = parse_key(argv[1], key);
    if (keylen < WIDTH + 4) {
        fprintf(stderr, "bad key\n");
        return 2;
    }
    build_table(key, keylen);
    if (strcmp(argv[2], "bench") == 0 && argc == 5) {
        size_t n = strtoull(argv[3], NULL, 10);
        int reps = atoi(argv[4]);
        uint8_t *in = malloc(n * WIDTH);
        uint32_t *out = malloc(n * sizeof(uint32_t));
        uint64_t x = 0x9E3779B97F4A7C15ULL;
        for (size_t i = 0; i < n * WIDTH; i++) {
            x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
            in[i] = (uint8_t)((x * 0x2545F4914F6CDD1DULL) >> 56);
        }
        double best = 1e30;
        uint32_t check = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            hash_rows(in, out, n);
            double dt = now() - t0;
            if (dt < best)
                best = dt;
            check ^= out[r % n];
        }
        printf("%.6e %zu %.9f %u\n", (double)n / best, n, best, check);
        free(in);
        free(out);
        return 0;
    }
    if (strcmp(argv[2], "hash") == 0 && argc == 5) {
        FILE *f = fopen(argv[3], "rb");
        if (!f) return 1;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        size_t n = (size_t)sz / WIDTH;
        uint8_t *in = malloc(n * WIDTH + 1);
        uint32_t *out = malloc(n * sizeof(uint32_t) + 4);
        if (fread(in, 1, n * WIDTH, f) != n * WIDTH) return 1;
        fclose(f);
        hash_rows(in, out, n);
        FILE *g = fopen(argv[4], "wb");
        if (!g) return 1;
        fwrite(out, sizeof(uint32_t), n, g);
        fclose(g);
        free(in);
        free(out);
        return 0;
    }
    fprintf(stderr, "bad mode\n");
    return 2;
}
"""


class CToeplitz:
    """The C implementation, compiled into a temporary folder (removed by ``close``)."""

    def __init__(self, key: bytes = MS_RSS_KEY, cflags: tuple[str, ...] = ("-O2",)):
        cc = shutil.which("gcc") or shutil.which("cc")
        if cc is None:
            raise RuntimeError("no C compiler (gcc) on PATH")
        self.key = bytes(key)
        self.dir = Path(tempfile.mkdtemp(prefix="rxlab-toeplitz-"))
        src = self.dir / "toeplitz.c"
        src.write_text(C_SOURCE)
        self.exe = self.dir / "toeplitz"
        self.compiler = f"{Path(cc).name} {' '.join(cflags)}"
        subprocess.run([cc, *cflags, "-std=c99", "-o", str(self.exe), str(src)], check=True,
                       capture_output=True, text=True)

    def hash(self, data: np.ndarray) -> np.ndarray:
        """Hash every 12-byte row of ``data`` with the C program."""
        data = np.ascontiguousarray(data, np.uint8)
        if data.ndim != 2 or data.shape[1] != WIDTH:
            raise ValueError(f"want (n, {WIDTH}) uint8 rows, got {data.shape}")
        fin, fout = self.dir / "in.bin", self.dir / "out.bin"
        fin.write_bytes(data.tobytes())
        subprocess.run([str(self.exe), self.key.hex(), "hash", str(fin), str(fout)],
                       check=True, capture_output=True)
        return np.frombuffer(fout.read_bytes(), dtype=np.uint32).copy()

    def bench(self, n: int, reps: int) -> float:
        """Hashes per second in C (best of ``reps`` passes over ``n`` tuples)."""
        out = subprocess.run([str(self.exe), self.key.hex(), "bench", str(n), str(reps)],
                             check=True, capture_output=True, text=True).stdout.split()
        return float(out[0])

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def random_tuples(n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, WIDTH), dtype=np.uint8)


def rxlab_hps(n: int, reps: int, key: bytes = MS_RSS_KEY) -> float:
    """Hashes per second of ``softrss`` (best of ``reps``; first call compiles/loads)."""
    table = convert_rss_key(key)
    data = random_tuples(n)
    softrss(table, data[:16])  # compile or load from cache: not timed
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        softrss(table, data)
        best = min(best, time.perf_counter() - t0)
    return n / best


def bench(quick: bool = False) -> dict:
    n = 1 << 20 if quick else 1 << 22
    reps = 5 if quick else 9
    with CToeplitz() as c:
        check = random_tuples(4096, seed=11)
        same = bool(np.array_equal(c.hash(check), softrss(convert_rss_key(MS_RSS_KEY), check)))
        c_hps = c.bench(n, reps)
        compiler = c.compiler
    py_hps = rxlab_hps(n, reps)
    return {
        "toeplitz_hps": py_hps,
        "c_toeplitz_hps": c_hps,
        "toeplitz_ratio_vs_c": py_hps / c_hps,
        "toeplitz_tuples": n,
        "toeplitz_c_compiler": compiler,
        "toeplitz_c_equal": same,
    }
