#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes token shards as llm.c's dev/data/data_common.py write_datafile does (a header of 256
little-endian int32: magic 20240520, version, token count; then the tokens), or raw uint16 as
nanoGPT's prepare.py does, from the bytes of a text file or directory (one token per byte).

usage: token_shards.py SRC OUTDIR [--raw] [--shards N] [--val-fraction F]
       token_shards.py --one OUT [--version V] [--magic M] [--count C] [--ids I,J,...] [--cut K]
       token_shards.py --random OUTDIR [--tokens N] [--val-tokens M] [--vocab V] [--seed S]
The second form writes one shard of the given ids (default 0..299) with a header that may lie,
cut short by K bytes: the malformed files the reader must refuse. The third writes one train and
one val shard of seeded uniform ids below V (GPT-2's 50257 by default): data for throughput runs,
the same bytes on every machine for the same seed."""
import argparse
import array
import os
import random
import struct
import sys

MAGIC = 20240520


def header(magic, version, count):
    return struct.pack("<256i", magic, version, count, *([0] * 253))


def corpus(src):
    if os.path.isdir(src):
        names = sorted(n for n in os.listdir(src)
                       if not n.endswith(".dat") and os.path.isfile(os.path.join(src, n))
                       and not os.path.islink(os.path.join(src, n)))
        return b"".join(open(os.path.join(src, n), "rb").read() for n in names)
    return open(src, "rb").read()


def write(path, ids, raw, version=1, magic=MAGIC, count=None, cut=0):
    kind = "H" if version != 2 else "I"
    body = array.array(kind, ids)
    if sys.byteorder != "little":
        body.byteswap()
    data = (b"" if raw else header(magic, version, len(ids) if count is None else count))
    data += body.tobytes()
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut] if cut else data)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src", nargs="?")
    p.add_argument("out")
    p.add_argument("--raw", action="store_true")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--one", action="store_true")
    p.add_argument("--version", type=int, default=1)
    p.add_argument("--magic", type=int, default=MAGIC)
    p.add_argument("--count", type=int)
    p.add_argument("--ids")
    p.add_argument("--cut", type=int, default=0)
    p.add_argument("--random", action="store_true")
    p.add_argument("--tokens", type=int, default=2 * 1024 * 1024)
    p.add_argument("--val-tokens", type=int, default=256 * 1024)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seed", type=int, default=1337)
    a = p.parse_args()
    if a.random:
        if not 1 <= a.vocab <= 65536:
            p.error(f"--vocab {a.vocab} does not fit uint16 token ids (1..65536)")
        rng = random.Random(a.seed)
        os.makedirs(a.out, exist_ok=True)
        for name, n in (("train", a.tokens), ("val", a.val_tokens)):
            ids = [rng.randrange(a.vocab) for _ in range(n)]
            write(os.path.join(a.out, f"random_{name}_000000.bin"), ids, False)
        return
    if a.one:
        ids = [int(x) for x in a.ids.split(",")] if a.ids else list(range(300))
        write(a.out, ids, a.raw, a.version, a.magic, a.count, a.cut)
        return
    toks = list(corpus(a.src))
    n_train = int(len(toks) * (1 - a.val_fraction))
    ext = "bin"
    os.makedirs(a.out, exist_ok=True)
    per = (n_train + a.shards - 1) // a.shards
    for i in range(a.shards):
        write(os.path.join(a.out, f"corpus_train_{i:06d}.{ext}"), toks[i * per:(i + 1) * per], a.raw)
    write(os.path.join(a.out, f"corpus_val_{0:06d}.{ext}"), toks[n_train:], a.raw)


if __name__ == "__main__":
    main()
