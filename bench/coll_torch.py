#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch gloo peer of `ddpc bench allreduce|broadcast|all_gather|reduce_scatter`: the same size
sweep, timing rule and table (or JSON lines) with torch.distributed on the gloo backend. Per size:
a barrier, `warmup` untimed calls, a barrier, the timed calls back to back; the figure is the max
over ranks of the mean time per call (nccl-tests' rule). The number of timed calls is --iters,
raised until the loop lasts --min-ms and lowered (to no fewer than 1) to fit --max-ms, both
estimated from the warm-up (max over ranks, so every rank runs the same count): gloo is slow at
large sizes and the whole sweep should stay within a couple of minutes.

Launch with torchrun (Debian's python3-torch 1.13 under Python 3.11 needs --redirects/--tee, and
gloo needs GLOO_SOCKET_IFNAME=lo here; see /work/shared/PEERS.md):
    GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run \
        --nproc_per_node 2 --redirects 1:2 --tee 1:2 bench/coll_torch.py allreduce --json
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # pragma: no cover
    sys.exit(f"coll_torch.py: cannot import torch ({e}); run it with /usr/bin/python3 "
             "(Debian's python3-torch)")

COLLS = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "broadcast": "broadcast",
         "bcast": "broadcast", "allgather": "all_gather", "all_gather": "all_gather",
         "reducescatter": "reduce_scatter", "reduce_scatter": "reduce_scatter"}
TYPES = {"f32": torch.float32, "f64": torch.float64,  # gloo 1.13 has no bfloat16
         "f16": torch.float16, "i32": torch.int32, "i64": torch.int64}
OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


def parse_bytes(s):
    """'4096', '4K', '256M', '1G' (powers of 1024, as nccl-tests reads -b/-e)."""
    mul = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(s[-1:].lower(), 1)
    digits = s[:-1] if mul > 1 else s
    if not digits.isdigit() or int(digits) == 0:
        raise argparse.ArgumentTypeError(f"bad size '{s}'")
    return int(digits) * mul


def positive(lo):
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            v = lo - 1
        if v < lo:
            raise argparse.ArgumentTypeError(f"'{s}' is not an integer >= {lo}")
        return v
    return parse


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("coll", choices=sorted(COLLS))
    p.add_argument("--min-bytes", type=parse_bytes, default=4096)
    p.add_argument("--max-bytes", type=parse_bytes, default=256 << 20)
    p.add_argument("--step-factor", type=positive(2), default=2)
    p.add_argument("--iters", type=positive(1), default=20)
    p.add_argument("--warmup", type=positive(0), default=5)
    p.add_argument("--min-ms", type=positive(0), default=0)
    p.add_argument("--max-ms", type=positive(0), default=0)
    p.add_argument("--dtype", choices=list(TYPES), default="f32")
    p.add_argument("--op", choices=list(OPS), default="sum")
    p.add_argument("--check", action="store_true")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.coll = COLLS[a.coll]
    if a.min_bytes > a.max_bytes:
        p.error("--min-bytes is larger than --max-bytes")
    if a.coll == "reduce_scatter":
        p.error("gloo in PyTorch 1.13 has no reduce_scatter (ProcessGroupGloo does not "
                "implement it)")
    return a


def values(rank, n, dtype):
    """Rank `rank`'s inputs: small integers, exact in every type and any sum of <= 32 ranks."""
    i = torch.arange(n, dtype=torch.int32)
    return ((i * 7 + rank * 13) % 17 - 8).to(dtype)


def expected(a, rank, world, per, dtype):
    """The right result, built in `dtype` (exact: sums, minima and maxima of small integers)."""
    if a.coll == "broadcast":
        return values(0, per, dtype)
    if a.coll == "all_gather":
        return torch.cat([values(r, per, dtype) for r in range(world)])
    acc = values(0, per, dtype)
    for r in range(1, world):
        v = values(r, per, dtype)
        acc = acc + v if a.op == "sum" else torch.minimum(acc, v) if a.op == "min" else \
            torch.maximum(acc, v)
    return acc


class Sweep:
    """Buffers allocated once at the largest size; one size is views of their fronts."""

    def __init__(self, a, rank, world):
        self.a, self.rank, self.world = a, rank, world
        self.dtype = TYPES[a.dtype]
        cap = a.max_bytes // torch.tensor([], dtype=self.dtype).element_size()
        self.send = torch.zeros(cap, dtype=self.dtype)
        self.recv = torch.zeros(cap, dtype=self.dtype)

    def setup(self, per):
        """Fills the inputs of one call with `per` elements per rank block."""
        a = self.a
        nrecv = per * self.world if a.coll == "all_gather" else per
        self.s = self.send[:per]
        self.r = self.recv[:nrecv]
        self.s.copy_(values(self.rank, per, self.dtype))
        self.r.fill_(-99)
        if a.coll == "all_reduce":
            self.r.copy_(self.s)
        elif a.coll == "broadcast" and self.rank == 0:
            self.r.copy_(values(0, per, self.dtype))
        self.blocks = list(self.r.chunk(self.world)) if a.coll == "all_gather" and per else None

    def run(self):
        a = self.a
        if a.coll == "all_reduce":
            # In place, as DDP calls it; the timed calls keep reducing their own output.
            dist.all_reduce(self.r, op=OPS[a.op])
        elif a.coll == "broadcast":
            dist.broadcast(self.r, src=0)
        elif self.blocks is not None:
            dist.all_gather(self.blocks, self.s)


def max_over_ranks(x):
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def bench_size(sw, nbytes):
    a, world = sw.a, sw.world
    esize = sw.send.element_size()
    per = nbytes // esize // (world if a.coll == "all_gather" else 1)
    total = per * (world if a.coll == "all_gather" else 1)
    sw.setup(per)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(max(a.warmup, 1 if a.min_ms or a.max_ms else 0)):
        sw.run()
    est = max_over_ranks((time.perf_counter() - t0) / max(a.warmup, 1))
    iters = a.iters
    if a.min_ms and est > 0 and iters * est < a.min_ms * 1e-3:
        iters = min(1000000, math.ceil(a.min_ms * 1e-3 / est))
    if a.max_ms and iters * est > a.max_ms * 1e-3:
        iters = max(1, math.floor(a.max_ms * 1e-3 / est))
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        sw.run()
    tmax = max_over_ranks((time.perf_counter() - t0) / iters)
    wrong = None
    if a.check:
        sw.setup(per)
        sw.run()
        want = expected(a, sw.rank, world, per, sw.dtype)
        w = torch.tensor([int((sw.r != want).sum().item())], dtype=torch.int64)
        dist.all_reduce(w)
        wrong = int(w.item())
    size = total * esize
    algbw = size / tmax * 1e-9 if tmax > 0 else 0.0
    factor = {"all_reduce": 2.0 * (world - 1) / world, "broadcast": 1.0}.get(
        a.coll, (world - 1) / world)
    redop = a.op if a.coll == "all_reduce" else "none"
    if sw.rank == 0:
        if a.json:
            print(json.dumps({"bench": a.coll, "impl": "gloo", "ranks": world, "size": size,
                              "count": total, "type": a.dtype, "redop": redop, "iters": iters,
                              "time_us": round(tmax * 1e6, 3), "algbw": round(algbw, 4),
                              "busbw": round(algbw * factor, 4), "wrong": wrong}), flush=True)
        else:
            print(f"{size:12d}  {total:12d}  {a.dtype:>6}  {redop:>6}  {tmax * 1e6:10.2f}  "
                  f"{algbw:7.2f}  {algbw * factor:7.2f}  "
                  f"{'N/A' if wrong is None else wrong:>6}", flush=True)
    return wrong or 0


def main():
    a = parse_args()
    if "RANK" not in os.environ:
        sys.exit("coll_torch.py: RANK is not set; launch it with torchrun "
                 "(python3 -m torch.distributed.run)")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    sw = Sweep(a, rank, world)
    if rank == 0 and not a.json:
        fit = (f", more to last {a.min_ms} ms" if a.min_ms else "") + \
            (f", fewer to fit {a.max_ms} ms" if a.max_ms else "")
        print(f"# coll_torch {a.coll} (gloo): {world} ranks, {a.iters} iters{fit} after "
              f"{a.warmup} warm-up; time = max over ranks of the mean per call")
        print(f"# {'size':>10}  {'count':>12}  {'type':>6}  {'redop':>6}  {'time':>10}  "
              f"{'algbw':>7}  {'busbw':>7}  {'#wrong':>6}")
        print(f"# {'(B)':>10}  {'(elements)':>12}  {'':>6}  {'':>6}  {'(us)':>10}  "
              f"{'(GB/s)':>7}  {'(GB/s)':>7}  {'':>6}", flush=True)
    wrong, nbytes = 0, a.min_bytes
    while nbytes <= a.max_bytes:
        wrong += bench_size(sw, nbytes)
        nbytes *= a.step_factor
    dist.barrier()
    dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
