#!/usr/bin/env bash
# The seq2seq model's options where the user meets them, `ddpc run` with 2 ranks on a small
# string-reversal task (char tokens, dropout 0.1): activation checkpointing gives the same losses,
# test metrics and final weights bit for bit and a smaller activation figure; precision bf16
# trains to a loss close to fp32's but not equal; ZeRO stage 3 with checkpointing and bf16 trains
# and evaluates (greedy decoding reads gathered parameters); evaluation with beam search runs.
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
run ckpt model.activation_checkpointing=true
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
summary
