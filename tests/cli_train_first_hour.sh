#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A new user's first runs through `ddpc train` (tiny models, each run a second or so): a warm-up
# longer than a short run (the shipped configs with max_steps=6) ends with the run, one notice
# saying so, and the run is the one asked with warmup_steps = its length; a data set smaller than
# one batch trains on the partial batch with one notice, the same losses on 2 ranks x b as on
# 1 rank x 2b, and data.drop_last refuses it with one line and no run directory; Lightning's
# precision spellings run as fp32/fp16/bf16 and config.yaml writes the canonical name, and the
# "-true" spellings are refused saying why; the legacy launcher's --local-rank / --local_rank flag
# is accepted in each position it puts it, checked against LOCAL_RANK, and is the local rank under
# a launcher that sets RANK only.
# usage: cli_train_first_hour.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cd "$tmp" || exit 1

# refused NAME WANT RUN_DIR COMMAND...: exits non-zero (not by a signal) with one stderr line
# holding WANT, and leaves no RUN_DIR behind.
refused() {
    local name=$1 want=$2 dir=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$tmp/err" && [ ! -e "$dir" ]; then
        ok "$name: $(cat "$tmp/err")"
    else
        fail "$name (exit $rc, $lines stderr lines, wanted '$want', $dir absent):" "$tmp/err"
    fi
}
lrs() { grep -o '"lr": [0-9.e+-]*' "$1/metrics.jsonl"; }
losses() { grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss": [0-9.]*' "$1/metrics.jsonl"; }
# yaml_key FILE KEY: a top-level key's value in an effective config.yaml.
yaml_key() { awk -v k="$2:" '$1 == k { print $2; exit }' "$1"; }

# --- A warm-up of 100 steps (gpt_fortunes.yaml's) on a 6-step run: the whole run warms up.
gpt=("$src/configs/gpt_fortunes.yaml" max_steps=6 eval_every=0 eval_batches=1 test_batches=1
     log_every=1 model.n_layer=1 model.n_embd=32 model.block_size=16 num_threads=1)
"$ddpc" train "${gpt[@]}" run_dir=w100 weights_out=w100.st >w100.log 2>&1
check_status "gpt_fortunes.yaml max_steps=6 (warm-up 100) trains" $? w100.log
check "... saying once that warm-up takes the whole run" test "$(grep -c \
    "^optim.warmup_steps 100 is more than the run's 6 steps: warm-up takes the whole run$" w100.log)" -eq 1
"$ddpc" train "${gpt[@]}" optim.warmup_steps=6 run_dir=w6 weights_out=w6.st >w6.log 2>&1
check_status "the same run with optim.warmup_steps=6 trains" $? w6.log
check "... without the notice" bash -c '! grep -q "warm-up takes" w6.log'
check "... at the same learning rates" diff <(lrs w100) <(lrs w6)
check "... ending at optim.lr" test "$(lrs w100 | tail -1)" = '"lr": 0.001'
check "... to the same weights" cmp w100.st w6.st

# --- Five sentence pairs and data.batch_size 32 (translate_demo.yaml, warm-up 200).
printf 'ab\ncd\nef\ngh\nij\n' >t5.src
printf 'ba\ndc\nfe\nhg\nji\n' >t5.tgt
head -n 4 t5.src >t4.src
head -n 4 t5.tgt >t4.tgt
tr=("$src/configs/translate_demo.yaml" data.valid_src=null data.valid_tgt=null eval_every=0
    epochs=3 log_every=1 model.d_model=16 model.num_heads=2 model.d_ff=32 model.dropout=0
    data.shuffle=false)
five=(data.train_src=t5.src data.train_tgt=t5.tgt data.test_src=t5.src data.test_tgt=t5.tgt)
four=(data.train_src=t4.src data.train_tgt=t4.tgt data.test_src=t4.src data.test_tgt=t4.tgt)
"$ddpc" train "${tr[@]}" "${five[@]}" run_dir=t5 >t5.log 2>&1
check_status "5 pairs with data.batch_size 32 train" $? t5.log
check "... saying once that each epoch is one step on the partial batch of 5" test "$(grep -c \
    "^data: 5 training samples are fewer than data.batch_size 32: each epoch is one step on a partial batch of 5 (data.drop_last: true refuses instead)$" \
    t5.log)" -eq 1
check "... and once that warm-up (200) takes the whole run (3 steps)" test "$(grep -c \
    "^optim.warmup_steps 200 is more than the run's 3 steps" t5.log)" -eq 1
check "... 3 epochs of 1 step" test "$(losses t5 | cut -d, -f1,2 | tr '\n' ' ')" = \
    '"step": 1, "epoch": 0 "step": 2, "epoch": 1 "step": 3, "epoch": 2 '
refused "data.drop_last: true refuses the partial batch" \
    "more than the 5 training samples (data.drop_last: true drops a partial batch)" t5_drop \
    "$ddpc" train "${tr[@]}" "${five[@]}" data.drop_last=true run_dir=t5_drop
# N ranks x b = 1 rank x N.b holds for the partial batch (4 pairs divide over 2 ranks).
"$ddpc" train "${tr[@]}" "${four[@]}" data.batch_size=64 run_dir=t4_1 >t4_1.log 2>&1
check_status "4 pairs, 1 rank x batch 64 trains" $? t4_1.log
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${tr[@]}" "${four[@]}" data.batch_size=32 \
    run_dir=t4_2 >t4_2.log 2>&1
check_status "4 pairs, 2 ranks x batch 32 train" $? t4_2.log
check "... saying each rank trains a partial batch of 2" grep -q \
    "data: 4 training samples, 2 on each of 2 ranks, are fewer than data.batch_size 32: each epoch is one step on a partial batch of 2 per rank" \
    t4_2.log
same_losses() {
    paste -d' ' <(losses t4_1 | sed 's/.*"loss": //') <(losses t4_2 | sed 's/.*"loss": //') |
        awk 'BEGIN { n = 0 } { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) exit 1 }
             END { exit n != 3 }'
}
check "... the losses of 1 rank x 64 (3 steps, within 1e-5)" same_losses

# --- Lightning's precision spellings.
mlp=("$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=64 data.batch_size=16
     max_steps=1 'model.hidden=[8]' num_threads=1 eval_batches=1 test_batches=1)
for pair in 32:fp32 32-true:fp32 16:fp16 16-mixed:fp16 bf16:bf16 bf16-mixed:bf16; do
    spell=${pair%%:*} want=${pair#*:}
    "$ddpc" train "${mlp[@]}" precision="$spell" run_dir="p$spell" >"p$spell.log" 2>&1
    check_status "precision=$spell trains" $? "p$spell.log"
    check "... as $want" grep -q "^precision $want: " "p$spell.log"
    check "... and config.yaml says precision: $want" test "$(yaml_key "p$spell/config.yaml" precision)" = "$want"
done
{ cat "$src/configs/fmnist_mlp.yaml"; printf "precision: 16-mixed\n"; } >lightning.yaml
"$ddpc" train lightning.yaml "${mlp[@]:1}" run_dir=pfile >pfile.log 2>&1
check_status "precision: 16-mixed in a config file trains" $? pfile.log
check "... as fp16, config.yaml saying fp16" test "$(yaml_key pfile/config.yaml precision)" = fp16
for spell in 16-true bf16-true; do
    refused "precision=$spell is refused" \
        "key 'precision' cannot be '$spell': ddpc keeps fp32 weights and casts only the matrix products" \
        "r$spell" "$ddpc" train "${mlp[@]}" precision="$spell" run_dir="r$spell"
done

# --- torch.distributed.launch's --local-rank.
for form in "--local-rank 0" "--local_rank=0" "--local-rank=0"; do
    # shellcheck disable=SC2086 # the form is one or two words
    env -u LOCAL_RANK "$ddpc" train "${mlp[@]}" $form run_dir="lr$form" >lr.log 2>&1
    check_status "ddpc train CONFIG ... $form trains" $? lr.log
done
env -u LOCAL_RANK "$ddpc" train --local_rank=0 "${mlp[@]}" run_dir=lr_before >lr.log 2>&1
check_status "ddpc train --local_rank=0 CONFIG ... trains" $? lr.log
env -u LOCAL_RANK "$ddpc" --local-rank=0 train "${mlp[@]}" run_dir=lr_first >lr.log 2>&1
check_status "ddpc --local-rank=0 train CONFIG (launch --no-python's order) trains" $? lr.log
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 "$ddpc" train "${mlp[@]}" --local-rank 0 run_dir=lr_env >lr.log 2>&1
check_status "--local-rank 0 with LOCAL_RANK=0 trains" $? lr.log
refused "--local-rank 1 with LOCAL_RANK=0 is refused" \
    "--local-rank 1 disagrees with LOCAL_RANK=0 in the environment" lr_bad \
    env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 "$ddpc" train "${mlp[@]}" --local-rank 1 run_dir=lr_bad
refused "--local-rank 1 without a launcher is refused" "no launcher's environment" lr_alone \
    env -u LOCAL_RANK "$ddpc" train "${mlp[@]}" --local-rank 1 run_dir=lr_alone
# A launcher of torch < 1.9: RANK and WORLD_SIZE set, the local rank only in the flag.
"$ddpc" run --nproc-per-node 2 -- bash -c 'unset LOCAL_RANK; exec "$0" "$@" --local_rank="$RANK"' \
    "$ddpc" train "${mlp[@]}" data.batch_size=8 max_steps=2 run_dir=lr_legacy >lr_legacy.log 2>&1
check_status "2 workers given --local_rank=RANK and no LOCAL_RANK train" $? lr_legacy.log
check "... as one job of 2 ranks" grep -q "x 2 ranks x" lr_legacy.log

summary
