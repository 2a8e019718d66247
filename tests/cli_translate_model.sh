#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The seq2seq model's options where the user meets them, `ddpc run` with 2 ranks on a small
# string-reversal task (char tokens, dropout 0.1): activation checkpointing gives the same losses,
# test metrics and final weights bit for bit and a smaller activation figure; precision bf16
# trains to a loss close to fp32's but not equal; ZeRO stage 3 with checkpointing and bf16 trains
# and evaluates (greedy decoding reads gathered parameters); evaluation with beam search runs; the
# documented defaults (the paper's base model, word tokens, validation on the test split) and
# refusals.
# usage: cli_translate_model.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1

/usr/bin/python3 - "$tmp" <<'EOF'
import random, sys
random.seed(5)
for split, n in (("train", 600), ("valid", 40), ("test", 40)):
    with open(f"{sys.argv[1]}/{split}.src", "w") as s, open(f"{sys.argv[1]}/{split}.tgt", "w") as t:
        for _ in range(n):
            w = "".join(random.choice("abcdefgh") for _ in range(random.randint(2, 6)))
            s.write(w + "\n")
            t.write(w[::-1] + "\n")
EOF
cat >"$tmp/cfg.yaml" <<EOF
seed: 7
num_threads: 1
epochs: 2
log_every: 10
log:
  progress: plain
model:
  type: seq2seq
  d_model: 32
  num_heads: 4
  num_encoder_layers: 2
  num_decoder_layers: 2
  d_ff: 64
  dropout: 0.1
data:
  type: translation
  train_src: $tmp/train.src
  train_tgt: $tmp/train.tgt
  valid_src: $tmp/valid.src
  valid_tgt: $tmp/valid.tgt
  test_src: $tmp/test.src
  test_tgt: $tmp/test.tgt
  tokenize: char
  max_len: 10
  batch_size: 16
optim:
  type: adamw
  lr: 0.003
EOF

# run NAME [KEY=VALUE...]: 2 ranks under ddpc run into $tmp/NAME.
run() {
    local name=$1
    shift
    timeout 200 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/cfg.yaml" run_dir="$tmp/$name" \
        weights_out="$tmp/$name.safetensors" "$@" >"$tmp/$name.log" 2>&1
    check_status "$name trains on 2 ranks" $? "$tmp/$name.log"
}
# losses NAME: every loss in NAME's metrics.jsonl (training records, then the test record).
losses() { grep -o '"loss": [0-9.e+-]*' "$tmp/$1/metrics.jsonl"; }
last_train_loss() { grep '"epoch"' "$tmp/$1/metrics.jsonl" | tail -1 | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/'; }

run plain
# Pairs vary in length: the rate is samples/s, with no tokens_per_s that would repeat it.
check "the progress line gives samples/s, not tok/s" \
    bash -c "grep -q '^step .* samples/s' '$tmp/plain.log' && ! grep -q 'tok/s' '$tmp/plain.log'"
check "metrics.jsonl has samples_per_s and no tokens_per_s" \
    bash -c "grep -q samples_per_s '$tmp/plain/metrics.jsonl' && ! grep -q tokens_per_s '$tmp/plain/metrics.jsonl'"
run ckpt model.activation_checkpointing=true
# ddpc bench step on pairs: one process and 2 ranks, samples/s and GFLOP/s from the batches' widths.
"$ddpc" bench step "$tmp/cfg.yaml" bench.steps=3 bench.warmup=1 >"$tmp/bench1.json" 2>"$tmp/bench1.err"
check_status "bench step times translation steps" $? "$tmp/bench1.err"
"$ddpc" run --nproc-per-node 2 -- "$ddpc" bench step "$tmp/cfg.yaml" bench.steps=3 bench.warmup=1 \
    >"$tmp/bench2.json" 2>"$tmp/bench2.err"
check_status "bench step times translation steps on 2 ranks" $? "$tmp/bench2.err"
check "bench step reports pairs per second, GFLOP/s and no token rate" /usr/bin/python3 -c '
import json, sys
for path, world in ((sys.argv[1], 1), (sys.argv[2], 2)):
    r = json.loads(open(path).read().strip().splitlines()[-1])
    assert r["world"] == world and r["samples_per_s"] > 0 and r["tokens_per_s"] == 0, r
    assert 0 < r["gflops"] < 1000, r
' "$tmp/bench1.json" "$tmp/bench2.json"
check "checkpointing: the same losses, bit for bit" test "$(losses plain)" = "$(losses ckpt)"
check "checkpointing: losses were logged" test "$(losses plain | wc -l)" -ge 4
check "checkpointing: the same test record" test \
    "$(grep '"split": "test"' "$tmp/plain/metrics.jsonl" | sed 's/"time_s[^,]*,//; s/"eval_s[^,]*,//')" = \
    "$(grep '"split": "test"' "$tmp/ckpt/metrics.jsonl" | sed 's/"time_s[^,]*,//; s/"eval_s[^,]*,//')"
check "checkpointing: the same final weights" cmp -s "$tmp/plain.safetensors" "$tmp/ckpt.safetensors"
check "checkpointing: the start line says on and gives the figure without" \
    grep -q "activations: .* (checkpointing on; .* without)" "$tmp/ckpt.log"

run bf16 precision=bf16
a=$(last_train_loss plain) b=$(last_train_loss bf16)
echo "last logged training loss: fp32 $a, bf16 $b"
check "bf16: the products ran in bf16" grep -q "^precision bf16" "$tmp/bf16.log"
check "bf16: loss within 3% of fp32's, not equal" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; exit !(a != b && d < 0.03) }'

run zero3 zero.stage=3 model.activation_checkpointing=true precision=bf16 eval_beam_size=3
check "zero 3 + checkpointing + bf16 + beam 3: a test record with BLEU" \
    grep -q '"split": "test".*"bleu"' "$tmp/zero3/metrics.jsonl"
check "zero 3: the test loss is finite" \
    grep -qE '"split": "test".*"eval_loss": [0-9]' "$tmp/zero3/metrics.jsonl"

# docs/config.md and docs/seq2seq.md's defaults and refusals, on four word pairs (one too long).
mkdir -p "$tmp/tiny"
printf 'a b\nb a\na b c\na b c d e f g h\n' >"$tmp/tiny/train.src"
printf 'x y\ny x\nx y z\nx y z x y z x y\n' >"$tmp/tiny/train.tgt"
printf 'a b\nb a c\na\n' >"$tmp/tiny/test.src"
printf 'x y\ny x z\nx\n' >"$tmp/tiny/test.tgt"
cat >"$tmp/tiny.yaml" <<EOF
num_threads: 1
model: {type: seq2seq}
data: {type: translation, max_len: 8, batch_size: 2, train_src: $tmp/tiny/train.src,
       train_tgt: $tmp/tiny/train.tgt, test_src: $tmp/tiny/test.src, test_tgt: $tmp/tiny/test.tgt}
EOF
"$ddpc" train "$tmp/tiny.yaml" epochs=0 run_dir="$tmp/dflt" >"$tmp/dflt.log" 2>&1
check_status "the default seq2seq builds and evaluates" $? "$tmp/dflt.log"
check "the paper's base model: 512 wide, 8 heads, 6 + 6 layers, d_ff 2048; label smoothing and dropout 0.1; max_len data.max_len" \
    test "$(sed -n '/^model:/,/^[^ ]/p' "$tmp/dflt/config.yaml" | grep -E '^  (d_model|num_heads|num_(en|de)coder_layers|d_ff|label_smoothing|dropout|max_len):' | tr -d ' ' | tr '\n' ' ')" = \
    "d_model:512 num_heads:8 num_encoder_layers:6 num_decoder_layers:6 d_ff:2048 label_smoothing:0.1 dropout:0.1 max_len:8 "
check "data.tokenize defaults to word (4 specials + a .. h: all train lines count)" grep -q "tokenize=word min_freq=1 size=12" "$tmp/dflt/vocab.src.txt"
check "a train pair longer than data.max_len is left out and counted" grep -q \
    "; 1 train pairs longer than data.max_len 8 left out" "$tmp/dflt.log"
check "predict.input defaults to data.test_src" grep -q "^  input: $tmp/tiny/test.src$" "$tmp/dflt/config.yaml"
small=(model.d_model=8 model.num_heads=2 model.d_ff=8 model.num_encoder_layers=1 model.num_decoder_layers=1)
"$ddpc" train "$tmp/tiny.yaml" "${small[@]}" max_steps=2 eval_every=1 run_dir="$tmp/val" >"$tmp/val.log" 2>&1
check_status "a small model trains two steps" $? "$tmp/val.log"
check "without data.valid_*, validation reads the test split (3 pairs)" \
    grep -q '"step": 1, "split": "val", .*"eval_samples": 3' "$tmp/val/metrics.jsonl"
# refused NAME WANT ARGS...: the run fails, its output names the problem.
refused() {
    local name=$1 want=$2
    shift 2
    "$ddpc" train "$tmp/tiny.yaml" "${small[@]}" epochs=0 run_dir="$tmp/ref" "$@" >"$tmp/ref.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$want" "$tmp/ref.log"; then ok "$name"; else fail "$name (exit $rc)" "$tmp/ref.log"; fi
}
refused "model.max_len below data.max_len" "key 'model.max_len' must be an integer in [8, 65536], got '4'" model.max_len=4
refused "num_heads must divide d_model" "seq2seq d_model (8) must be a positive multiple of num_heads (3)" model.num_heads=3
refused "data.vocab_size 1-4 cannot hold the specials" "key 'data.vocab_size' must be 0 (no cap) or > 4, got 4" data.vocab_size=4
refused "data.train_src is required" "data.type translation needs key 'data.train_src'" data.train_src=
refused "data.test_tgt is required" "data.type translation needs key 'data.test_tgt'" data.test_tgt=
refused "a BatchNorm key is not read for seq2seq" "unknown key 'model.batchnorm'" model.batchnorm=true
cat >"$tmp/tasks.yaml" <<EOF
model: {type: seq2seq}
tasks:
  - name: a
    data: {type: translation, train_src: $tmp/tiny/train.src, train_tgt: $tmp/tiny/train.tgt,
           test_src: $tmp/tiny/test.src, test_tgt: $tmp/tiny/test.tgt}
EOF
"$ddpc" train "$tmp/tasks.yaml" run_dir="$tmp/tasks" >"$tmp/tasks.log" 2>&1
check "translation is single-task" grep -q "data.type translation is single-task: use the data.\* keys, not tasks" "$tmp/tasks.log"
summary
