#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch DistributedDataParallel peer for `ddpc run ... ddpc bench step`: times full fp32
data-parallel training steps of bench/torch_step.py's models (imported from it, so both
benchmarks run the same model) over gloo, and rank 0 prints one JSON line.

Start it with torchrun, one thread per rank (bench/ddp_bench.sh does this with the environment
of /work/shared/PEERS.md, "Running the peers fairly"):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo \\
    torchrun --nproc_per_node 2 --master_port P --redirects 1:2 --tee 1:2 \\
        bench/torch_ddp.py gpt --threads 1 [--steps 20 --warmup 3]

What it measures, per rank batch as in the ddpc config (GPT 8, MLP 128, CNN 64):
- step: zero_grad + forward + cross-entropy + backward (DDP's bucketed all-reduce overlapping it)
  + optimizer step. The step time of a step is the slowest rank's; the median over the timed
  steps after warm-up gives samples/s (global = world x batch / median).
- exposed: PyTorch's own DDP timers (the reducer's runtime stats, sampled every step through
  _set_ddp_runtime_logging_sample_rate(1)): kBackwardCommEnd - kBackwardComputeEnd, the time
  backward's final callback waited for the bucket all-reduces after the last gradient was ready
  (ddpc's exposed is the same interval). comm_span: kBackwardCommEnd - kBackwardCommStart, from
  the first bucket's launch to the last one's completion, backward compute included. A step's
  stats are recorded at the next forward, so timed steps 1..N-1 are read after steps 2..N; mean
  over ranks, then median and mean over steps.
- allreduce: median time of one blocking gloo all-reduce of a flat float32 buffer as large as
  all the gradients: the communication a step needs when nothing overlaps it.
  exposed_fraction = mean exposed / allreduce.
At world 1 the model is not wrapped (as ddpc, which builds no reducer for one rank), unless
--wrap-single.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import torch_step  # the models: bench/torch_step.py
except ImportError as e:  # pragma: no cover
    sys.exit(f"torch_ddp.py: cannot import torch ({e}); run it with /usr/bin/python3 "
             "(Debian's python3-torch)")


def timed_steps(model, opt, x, loss_fn, n, after=None, amp="none"):
    """Wall time of each of n training steps; after(i), if given, runs untimed after step i."""
    times = []
    loss = None
    for i in range(n):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(torch_step.forward(model, x, amp))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if after:
            after(i)
    if not math.isfinite(loss.item()):
        sys.exit("torch_ddp.py: non-finite loss")
    return times


class CommStats:
    """Per-step exposed and total communication (ns) from DDP's own runtime stats."""

    def __init__(self, model):
        self.model, self.exposed, self.comm = model, [], []
        model._set_ddp_runtime_logging_sample_rate(1)

    def __call__(self, i):
        if i == 0:  # what the first timed step's forward recorded is the last warm-up step
            return
        d = self.model._get_ddp_logging_data()
        self.exposed.append(d["backward_comm_time_end"] - d["backward_compute_time_end"])
        self.comm.append(d["backward_comm_time"])

    def summary_ms(self, world):
        """Medians and means over steps of the mean over ranks, in ms."""
        t = torch.tensor([self.exposed, self.comm], dtype=torch.float64)
        dist.all_reduce(t)
        t /= world * 1e6
        e, c = t[0].tolist(), t[1].tolist()
        return {"exposed_comm_ms": statistics.median(e), "comm_span_ms": statistics.median(c),
                "exposed_comm_mean_ms": statistics.mean(e), "comm_span_mean_ms": statistics.mean(c)}


def slowest_rank(times, world):
    """Per step, the largest time over ranks (a synchronised step lasts as long as its slowest
    rank)."""
    if world == 1:
        return times
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def allreduce_time(numel, reps):
    """Median seconds of a blocking all-reduce of numel float32 values (gloo)."""
    buf = torch.ones(numel, dtype=torch.float32)
    times = []
    for i in range(reps + 2):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return statistics.median(slowest_rank(times, dist.get_world_size()))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(torch_step.MODELS))
    ap.add_argument("--threads", type=int, required=True, help="threads per rank")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=None, help="per-rank batch (default: the model's)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--amp", choices=["none", "bf16"], default="none",
                    help="bf16: CPU autocast around the forward (torch_step.forward)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's (default 25)")
    ap.add_argument("--no-grad-view", action="store_true",
                    help="gradient_as_bucket_view=False (DDP's default; True, the default here, "
                         "saves a copy per bucket)")
    ap.add_argument("--no-allreduce", action="store_true",
                    help="skip the reference all-reduce timing")
    ap.add_argument("--wrap-single", action="store_true", help="wrap in DDP even at world 1")
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--threads and --steps must be >= 1, --warmup >= 0")
    return a


def main():
    a = parse_args()
    if "RANK" not in os.environ:
        sys.exit("torch_ddp.py: no RANK in the environment; start it with torchrun")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if os.environ.get(var) != str(a.threads):
            print(f"torch_ddp.py: warning: {var}={os.environ.get(var)!r} disagrees with "
                  f"--threads {a.threads} (see PEERS.md)", file=sys.stderr)
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed + rank)  # each rank its own batch; DDP copies rank 0's parameters

    make, default_batch = torch_step.MODELS[a.model]
    B = a.batch or default_batch
    model, opt, x, loss_fn, T = make(B)
    model.train()
    numel = sum(p.numel() for p in model.parameters())
    wrapped = world > 1 or a.wrap_single
    if wrapped:
        # No buffer changes during training (the GPT's causal masks are constant): no per-step
        # broadcast, and the masks, bool tensors gloo cannot broadcast, are not synced at start.
        DDP._set_params_and_buffers_to_ignore_for_model(
            model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
        model = DDP(model, broadcast_buffers=False, bucket_cap_mb=a.bucket_cap_mb,
                    gradient_as_bucket_view=not a.no_grad_view)

    timed_steps(model, opt, x, loss_fn, a.warmup, amp=a.amp)
    stats = CommStats(model) if wrapped else None
    med = statistics.median(slowest_rank(timed_steps(model, opt, x, loss_fn, a.steps, stats, a.amp),
                                         world))
    out = {"impl": "pytorch-ddp", "model": a.model, "threads": a.threads, "world": world,
           "batch": B, "steps": a.steps, "median_step_ms": round(1e3 * med, 3),
           "samples_per_s": round(B / med, 1), "tokens_per_s": round(B * T / med, 1),
           "global_samples_per_s": round(world * B / med, 1),
           "global_tokens_per_s": round(world * B * T / med, 1),
           "wrapped": wrapped, "bucket_cap_mb": a.bucket_cap_mb,
           "gradient_as_bucket_view": not a.no_grad_view, "params": numel}
    if stats and stats.exposed:
        out.update({k: round(v, 3) for k, v in stats.summary_ms(world).items()})
    if wrapped and not a.no_allreduce:
        out["allreduce_ms"] = round(1e3 * allreduce_time(numel, 10), 3)
        if "exposed_comm_mean_ms" in out:
            out["exposed_fraction"] = round(out["exposed_comm_mean_ms"] / out["allreduce_ms"], 4)
    out.update({"amp": a.amp, "torch": torch.__version__,
                "cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", "default")})
    if rank == 0:
        print(json.dumps(out), flush=True)
    # Not dist.destroy_process_group(): with torch 1.13's gloo it left rank 1 hanging after rank 0
    # had exited. A barrier, then the process exit, releases the group.
    dist.barrier()


if __name__ == "__main__":
    main()
