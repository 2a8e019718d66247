#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Data-parallel training end to end through `ddpc run`: 2 ranks x batch 8 reach the same test
# loss as 1 rank x batch 16 (same global batches), a repeat of the 2-rank job writes byte-identical
# weights, only rank 0 writes metrics and prints, grad accumulation and lr scaling are reported.
# README's torchrun line runs under Debian's torchrun and trains the same weights on 2 ranks.
# usage: cli_train_dist.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
common=(data.type=synthetic_images data.size=640 epochs=2 log_every=10 optim.momentum=0.9
        data.eval_batch_size=50)
test_loss() { grep '"split": "test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }

"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" data.batch_size=16 run_dir="$tmp/one" \
    >"$tmp/one.log" 2>&1
check "1 rank trains" test $? -eq 0
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" \
    data.batch_size=8 run_dir="$tmp/two" weights_out="$tmp/two.safetensors" >"$tmp/two.log" 2>&1
check "2 ranks train" test $? -eq 0
check "global batch reported" grep -q "global batch 16 = 8 per rank x 2 ranks x 1 accumulation step" "$tmp/two.log"
check "only rank 0 prints progress" test "$(grep -c '^eval test' "$tmp/two.log")" -eq 1
check "one metrics file, one final test record" test "$(grep -c '"split": "test"' "$tmp/two/metrics.jsonl")" -eq 1
check "evaluation counts every test sample once" grep -q '"eval_samples": 161' "$tmp/two/metrics.jsonl"
a=$(test_loss "$tmp/one")
b=$(test_loss "$tmp/two")
check "2 x 8 matches 1 x 16 (test loss $a vs $b)" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * a) }'

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" \
    data.batch_size=8 run_dir="$tmp/again" weights_out="$tmp/again.safetensors" >"$tmp/again.log" 2>&1
check "a repeat of the 2-rank job writes identical weights" cmp -s "$tmp/two.safetensors" "$tmp/again.safetensors"

# README's torchrun line, word for word (CONFIG: the 2-rank job's effective config.yaml with its
# outputs moved), under Debian's torchrun: 2 ranks on shm, and the weights of `ddpc run`'s job.
# PET_MASTER_PORT (torchrun reads its flags from PET_* too) keeps concurrent tests off port 29500;
# PET_LOG_DIR keeps its log files in $tmp.
line=$(grep -E '^torchrun ' "$src/README.md" | sed 's/ *#.*//')
if [ ! -x /usr/bin/torchrun ]; then
    fail "Debian's torchrun is missing (scripts/setup installs python3-torch)"
elif [ -z "$line" ]; then
    fail "README has a torchrun line"
else
    sed "s|$tmp/two|$tmp/tr|g" "$tmp/two/config.yaml" >"$tmp/tr.yaml"
    read -ra words <<<"$line"
    cmd=()
    for w in "${words[@]}"; do
        case $w in
        torchrun) cmd+=(/usr/bin/torchrun) ;;
        build/ddpc) cmd+=("$ddpc") ;;
        CONFIG) cmd+=("$tmp/tr.yaml") ;;
        *) cmd+=("$w") ;;
        esac
    done
    PET_MASTER_PORT=$((20000 + RANDOM % 12000)) PET_LOG_DIR="$tmp/torchrun" timeout 120 "${cmd[@]}" \
        >"$tmp/tr.log" 2>&1
    check_status "README's torchrun line trains ($line)" $? "$tmp/tr.log"
    check "on 2 ranks, shm" grep -q "global batch 16 = 8 per rank x 2 ranks x 1 accumulation step (backend shm" "$tmp/tr.log"
    check "every rank's step time is logged" grep -q '"rank_step_s": {"0": [0-9.e-]*, "1": ' "$tmp/tr/metrics.jsonl"
    check "the weights of the same job under ddpc run" cmp -s "$tmp/two.safetensors" "$tmp/tr.safetensors"
fi

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" \
    data.batch_size=4 optim.grad_accum_steps=2 optim.lr_scale=linear run_dir="$tmp/acc" \
    >"$tmp/acc.log" 2>&1
check "accumulation run trains" test $? -eq 0
check "accumulation and lr scale reported" grep -q "global batch 16 = 4 per rank x 2 ranks x 2 accumulation steps (backend shm, lr x 4)" "$tmp/acc.log"

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}" \
    data.batch_size=8 ddp.comm_dtype=bf16 run_dir="$tmp/bf16" >"$tmp/bf16.log" 2>&1
c=$(test_loss "$tmp/bf16")
check "bf16 gradient compression stays close (test loss $c vs $a)" \
    awk -v a="$a" -v c="$c" 'BEGIN { d = a - c; if (d < 0) d = -d; exit !(d <= 2e-2 * a) }'

summary
