#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The peer for bench/ckpt_bench.sh: how long PyTorch takes to save the same state durably.

usage: ckpt_torch.py CHECKPOINT_DIR [REPEAT]

Loads a ddpc checkpoint's tensors (model.safetensors, optimizer.safetensors: the same shapes and
bytes ddpc writes), then times what a PyTorch training script does at a checkpoint:
torch.save({"model": state_dict, "optimizer": state}) into a temporary file, flush + os.fsync,
os.replace into place (a durable, atomic save, as ddpc's). Prints one JSON line: median seconds.
"""
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from safetensors_interop import read  # noqa: E402


def main():
    ckpt = sys.argv[1]
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    _, params, _, _ = read(os.path.join(ckpt, "model.safetensors"))
    _, opt, meta, _ = read(os.path.join(ckpt, "optimizer.safetensors"))
    model = {k: torch.from_numpy(v.copy()) for k, v in params.items()}
    state = {k: torch.from_numpy(v.copy()) for k, v in opt.items()}
    blob = {"model": model, "optimizer": {"state": state, "step": int(meta.get("step_count", 0))}}
    out_dir = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(ckpt)))
    final = os.path.join(out_dir, "checkpoint.pt")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fd, tmp = tempfile.mkstemp(dir=out_dir)
        with os.fdopen(fd, "wb") as f:
            torch.save(blob, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        dfd = os.open(out_dir, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        times.append(time.perf_counter() - t0)
    size = os.path.getsize(final)
    os.remove(final)
    os.rmdir(out_dir)
    print(json.dumps({"torch_save_median_s": statistics.median(times), "bytes": size,
                      "repeat": repeat}))


if __name__ == "__main__":
    main()
