#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End-to-end trainer runs on small synthetic data: metrics.jsonl fields, weights_out/init_from
# round trip (test loss from the saved weights equals the final test loss), determinism, predict.
# usage: cli_train.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

common=(data.type=synthetic_images data.size=512 data.batch_size=32 epochs=2 log_every=4 num_threads=1)
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$tmp/a" weights_out="$tmp/a.safetensors" >"$tmp/a.log" 2>&1
check "train exits 0" test $? -eq 0
check "metrics has train fields" grep -q '"step": 4, "epoch": 0, "loss": .*"lr": .*"samples_per_s"' "$tmp/a/metrics.jsonl"
check "metrics has eval fields" grep -q '"split": "test", "eval_loss": .*"eval_accuracy"' "$tmp/a/metrics.jsonl"
check "weights saved" test -s "$tmp/a.safetensors"
check "images log no tokens_per_s (it would repeat samples_per_s)" test "$(grep -c tokens_per_s "$tmp/a/metrics.jsonl")" -eq 0
check "and their progress lines count samples/s" grep -Eq '^step +4/32 .* [0-9]+ samples/s' "$tmp/a.log"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$tmp/b" >"$tmp/b.log" 2>&1
strip() { grep -v -e time_s -e wall_s -e mem_plan_bytes -e rank_step_s -e '"mem": ' "$1" | sed 's/"samples_per_s": [0-9.]*, //; s/"tokens_per_s": [0-9.]*, //'; }
check "two runs give the same metrics" diff <(strip "$tmp/a/metrics.jsonl") <(strip "$tmp/b/metrics.jsonl")
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$tmp/c" state=test init_from="$tmp/a.safetensors" >"$tmp/c.log" 2>&1
final=$(grep '"split": "test"' "$tmp/a/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/')
again=$(grep '"split": "test"' "$tmp/c/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/')
check "init_from reproduces the test loss ($final vs $again)" test "$final" = "$again"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$tmp/d" state=predict predict.samples=10 init_from="$tmp/a.safetensors" >"$tmp/d.log" 2>&1
check "predict writes 10 rows" test "$(wc -l <"$tmp/d/predictions.csv")" -eq 11
cat >"$tmp/gpt.yaml" <<'YAML'
model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32, block_size: 16}
data: {type: synthetic_tokens, size: 20000, batch_size: 4}
optim: {type: adamw, lr: 0.001}
num_threads: 1
YAML
"$ddpc" train "$tmp/gpt.yaml" max_steps=6 eval_every=3 eval_batches=2 test_batches=3 log_every=3 run_dir="$tmp/g" >"$tmp/g.log" 2>&1
check "gpt trains and logs tokens_per_s" grep -q '"tokens_per_s": [1-9]' "$tmp/g/metrics.jsonl"
check "in every progress record" test "$(grep -c '"tokens_per_s": [1-9]' "$tmp/g/metrics.jsonl")" -eq 2
check "and its progress lines count tok/s" grep -Eq '^step +3/6 .* [0-9]+ tok/s' "$tmp/g.log"
check "gpt periodic eval is limited to eval_batches" test "$(grep -c '"split": "val".*"eval_samples": 8}' "$tmp/g/metrics.jsonl")" -eq 2
check "the final test to test_batches (3 batches of 4)" grep -q '"step": 6, "split": "test".*"eval_samples": 12}' "$tmp/g/metrics.jsonl"
# With the same limit, validation at the last step would be the test evaluation again: skipped.
"$ddpc" train "$tmp/gpt.yaml" max_steps=6 eval_every=3 eval_batches=2 test_batches=2 log_every=3 run_dir="$tmp/g2" >"$tmp/g2.log" 2>&1
check "eval_batches = test_batches: no validation at the last step" \
    test "$(grep -o '"step": [0-9]*, "split": "[a-z]*"' "$tmp/g2/metrics.jsonl" | tr '\n' ' ')" = '"step": 3, "split": "val" "step": 6, "split": "test" '
# state val and test take the same limits (Lightning's limit_val_batches, limit_test_batches).
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$tmp/v" state=val eval_batches=1 data.eval_batch_size=32 \
    test_batches=2 init_from="$tmp/a.safetensors" >"$tmp/v.log" 2>&1
check "state val reads eval_batches (1 batch of 32)" grep -q '"split": "val".*"eval_samples": 32}' "$tmp/v/metrics.jsonl"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$tmp/t" state=test eval_batches=1 data.eval_batch_size=32 \
    test_batches=2 init_from="$tmp/a.safetensors" >"$tmp/t.log" 2>&1
check "state test reads test_batches (2 batches of 32)" grep -q '"split": "test".*"eval_samples": 64}' "$tmp/t/metrics.jsonl"
"$ddpc" train "$tmp/gpt.yaml" state=predict predict.prompt=abc predict.max_new_tokens=20 run_dir="$tmp/h" >"$tmp/h.log" 2>&1
check "gpt predict writes prompt + 20 bytes" test "$(wc -c <"$tmp/h/samples.txt")" -eq 23
"$ddpc" bench step "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=256 bench.steps=3 bench.warmup=1 num_threads=1 >"$tmp/bench.json" 2>&1
check "bench prints one JSON line" grep -q '"median_step_ms": [0-9]' "$tmp/bench.json"
# The synthetic test split is labelled by the train split's map, so a small MLP generalises to it
# (chance is 0.1; this run reaches about 0.57, and sat at 0.11 when the test split had its own map).
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=8192 epochs=3 \
    data.batch_size=32 'model.hidden=[64]' log_every=1000 num_threads=1 run_dir="$tmp/s" >"$tmp/s.log" 2>&1
acc=$(grep '"split": "test"' "$tmp/s/metrics.jsonl" | tail -1 | sed 's/.*"eval_accuracy": \([0-9.]*\).*/\1/')
check "synthetic_images test accuracy is far above chance ($acc > 0.3)" \
    awk -v a="$acc" 'BEGIN { exit !(a + 0 > 0.3) }'
# data.label_map works for one task as for tasks.<i>: 10 synthetic classes folded into 2.
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" 'data.label_map=[0,0,0,0,0,1,1,1,1,1]' \
    run_dir="$tmp/lm" weights_out="$tmp/lm.safetensors" >"$tmp/lm.log" 2>&1
check "data.label_map trains" test $? -eq 0
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" 'data.label_map=[0,0,0,0,0,1,1,1,1,1]' \
    state=predict predict.samples=40 init_from="$tmp/lm.safetensors" run_dir="$tmp/lm_p" >"$tmp/lm_p.log" 2>&1
check "its predictions use the 2 derived labels only" \
    test "$(tail -n +2 "$tmp/lm_p/predictions.csv" | cut -d, -f2,3 | tr ',' '\n' | sort -u | tr '\n' ' ')" = "0 1 "
# Seed-style flags are the same overrides: identical metrics; --help prints them; each documented
# flag sets its key; a wrong flag is named.
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=512 \
    max_steps=3 log_every=1 num_threads=1 data.batch_size=16 optim.lr=0.02 epochs=1 \
    run_dir="$tmp/kv" >"$tmp/kv.log" 2>&1
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=512 \
    --max_steps 3 --log-every=1 --num_threads 1 --batch_size 16 --optim.lr 0.02 --epochs 1 \
    --run_dir "$tmp/fl" >"$tmp/fl.log" 2>&1
check "--batch_size 16 --epochs 1 ... trains" test $? -eq 0
steps='"step": [0-9]*, "epoch": [0-9]*, "loss": [0-9.]*, "lr": [0-9.e-]*'
check "... to the metrics of the key=value spelling" \
    diff <(grep -o "$steps" "$tmp/kv/metrics.jsonl") <(grep -o "$steps" "$tmp/fl/metrics.jsonl")
check "... (3 steps logged)" test "$(grep -c '"loss"' "$tmp/fl/metrics.jsonl")" -ge 3
"$ddpc" train --help >"$tmp/help.log" 2>&1
check "ddpc train --help exits 0" test $? -eq 0
check "... printing the usage and the flags" grep -q -- "--batch_size  *data.batch_size=VALUE" \
    "$tmp/help.log"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" --bogus 1 >"$tmp/bogus.log" 2>&1
check "an unknown flag exits 2" test $? -eq 2
check "... naming it" grep -q "unknown flag '--bogus'" "$tmp/bogus.log"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" --epochs >"$tmp/novalue.log" 2>&1
check "a flag without its value exits 2, naming it" \
    grep -q "flag '--epochs' needs a value" "$tmp/novalue.log"
check "... with exit status 2" bash -c '"$@" >/dev/null 2>&1; test $? -eq 2' _ "$ddpc" train "$src/configs/fmnist_mlp.yaml" --epochs
# Every flag docs/config.md lists, with the key it names, is what --help prints and what the
# effective config.yaml holds after a run given that flag (two runs: the aliases of one key apart;
# every value differs from the config's and the default).
/usr/bin/python3 - "$src/docs/config.md" >"$tmp/flags_doc.txt" <<'PY'
import re, sys
para = " ".join(open(sys.argv[1]).read().split("### Flags as the seeds write them")[1].split("###")[0].split())
for item in re.split(r", (?:and )?", para.split("The flags are ")[1].split(". Any dotted key")[0]):
    key = re.search(r"\(`([a-z_.]+)`\)", item)
    for f in re.findall(r"`(--[a-z_]+)`", item):
        print(f, key.group(1) if key else f[2:])
PY
check "docs/config.md lists 22 flags" test "$(wc -l <"$tmp/flags_doc.txt")" -eq 22
check "--help lists exactly the documented flags and keys" diff "$tmp/flags_doc.txt" \
    <(grep -E '^  --[a-z_]+ ' "$tmp/help.log" | sed 's/^  \(--[a-z_]*\)  *\([a-z_.]*\)=VALUE$/\1 \2/')
declare -A given=([--epochs]=2 [--batch_size]=16 [--num_workers]=0 [--lr]=0.07 [--weight_decay]=0.25
    [--gradient_accumulation_steps]=2 [--max_steps]=1 [--seed]=7 [--log_every]=3 [--eval_every]=5
    [--output_dir]="$tmp/fa" [--resume]=never [--weights_out]="$tmp/fa.st" [--state]=train
    [--num_threads]=1)
declare -A given2=([--learning_rate]=0.03 [--grad_accum_steps]=3 [--run_dir]="$tmp/fb"
    [--init_from]="$tmp/fa.st" [--state]=test)
args=() args2=()
for f in "${!given[@]}"; do args+=("$f" "${given[$f]}"); done
for f in "${!given2[@]}"; do args2+=("$f" "${given2[$f]}"); done
small=(data.type=synthetic_images data.size=128 'model.hidden=[8]' test_batches=1)
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${small[@]}" "${args[@]}" >"$tmp/fa.log" 2>&1
check_status "a run given every alias but three trains" $? "$tmp/fa.log"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${small[@]}" num_threads=1 "${args2[@]}" >"$tmp/fb.log" 2>&1
check_status "a run given the other three tests" $? "$tmp/fb.log"
# yaml_key FILE DOTTED: the value of a (one- or two-level) key in an effective config.yaml.
yaml_key() {
    local sec=- k=$2
    [[ $k == *.* ]] && sec=${k%%.*} k=${k#*.}
    awk -v s="$sec" -v k="$k" '/^[^ ]/ { cur = $1 } ((s == "-" && $1 == k ":") || (cur == s ":" && $1 == k ":")) { print $2; exit }' "$1"
}
while read -r f k; do
    case $f in --max_len | --use_checkpoint | --mode) continue ;; esac # seq2seq: cli_train_flags.sh
    if [ -n "${given2[$f]+x}" ]; then
        got=$(yaml_key "$tmp/fb/config.yaml" "$k") want=${given2[$f]}
    else
        got=$(yaml_key "$tmp/fa/config.yaml" "$k") want=${given[$f]-}
    fi
    if [ "$got" = "$want" ] && [ -n "$want" ]; then ok "$f sets $k"; else fail "$f sets $k: got '$got', want '$want'"; fi
done <"$tmp/flags_doc.txt"
# A seed's config.py: refused with the reason, not parsed as YAML.
printf 'lr = 0.1\nepochs = 3\n' >"$tmp/config.py"
"$ddpc" train "$tmp/config.py" >"$tmp/py.log" 2>&1
check "a Python config exits 2" test $? -eq 2
check "... saying Python configs are not supported and why" grep -q \
    "is a Python file: Python configs are not supported, since reading one means running it" \
    "$tmp/py.log"
if [ $failed -ne 0 ]; then tail -n 5 "$tmp"/*.log; fi
summary
