#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The seq2seq step benchmark's two sides (bench/README.md, "Training step throughput" (d)): `ddpc
# bench step bench/configs/seq2seq.yaml` on bench/lib.sh's seq2seq_pairs, and its PyTorch peer
# `bench/torch_step.py seq2seq`, each print their JSON line; the two models have the same tensors
# (names as torch.nn.Transformer's state_dict, shapes and count: 674,590 weights); the pairs
# give every batch the 16-wide shape the peer builds.
# usage: cli_bench_seq2seq.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
PY=/usr/bin/python3
. "$src/bench/lib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

read -ra pairs <<<"$(seq2seq_pairs "$tmp/pairs")"
check "seq2seq_pairs: 4096 pairs of 15 letters, each target its source reversed" \
    "$PY" -c '
import sys
s = open(sys.argv[1]).read().split(); t = open(sys.argv[2]).read().split()
assert len(s) == len(t) == 4096 and all(len(w) == 15 and w[::-1] == r for w, r in zip(s, t))
assert len(set("".join(s))) == 26' "$tmp/pairs/pairs.src" "$tmp/pairs/pairs.tgt"

"$ddpc" bench step "$src/bench/configs/seq2seq.yaml" "${pairs[@]}" num_threads=1 bench.steps=2 \
    bench.warmup=1 >"$tmp/ddpc.json" 2>"$tmp/ddpc.err"
check_status "ddpc bench step on the seq2seq config" $? "$tmp/ddpc.err"
check "ddpc: its JSON line, batch 32" grep -q '"config": "seq2seq", .*"batch": 32,' "$tmp/ddpc.json"

"$PY" "$src/bench/torch_step.py" seq2seq --threads 1 --steps 2 --warmup 1 >"$tmp/torch.json" \
    2>"$tmp/torch.err"
check_status "torch_step.py seq2seq" $? "$tmp/torch.err"
check "torch: its JSON line, batch 32" grep -q '"model": "seq2seq", .*"batch": 32,' "$tmp/torch.json"

# The same tensors: ddpc's saved weights against the peer's state_dict.
"$ddpc" train "$src/bench/configs/seq2seq.yaml" "${pairs[@]}" max_steps=1 eval_every=0 \
    eval_batches=1 test_batches=1 run_dir="$tmp/run" weights_out="$tmp/w.st" >"$tmp/train.log" 2>&1
check_status "one training step of the config" $? "$tmp/train.log"
check "the vocabularies: 30 ids a side, as the peer's" \
    grep -q "vocabularies of 30 source and 30 target" "$tmp/train.log"
"$PY" - "$src/bench" "$tmp/w.st" >"$tmp/tensors.txt" 2>&1 <<'PY'
import json, struct, sys
sys.path.insert(0, sys.argv[1])
import torch_step
raw = open(sys.argv[2], "rb").read()
header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
ddpc = {("transformer." + k if k.startswith(("encoder.", "decoder.")) else k): tuple(v["shape"])
        for k, v in header.items() if k != "__metadata__"}
model = torch_step.make_seq2seq(2, "cpu")[0]
torch = {k: tuple(v.shape) for k, v in model.state_dict().items()}
assert ddpc == torch, sorted(set(ddpc.items()) ^ set(torch.items()))
n = sum(p.numel() for p in model.parameters())
print("tensors", len(torch), "weights", n)
assert n == 674590, n
PY
check_status "the same tensors, names and shapes; 674,590 weights" $? "$tmp/tensors.txt"
summary
