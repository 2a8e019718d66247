#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The guides' command lines through `ddpc train` on configs/translate_demo.yaml (tiny data, a few
# steps each): every flag the seq2seq guides spell lands in the effective config.yaml (by last
# name, or by the aliases --max_len, --use_checkpoint and --mode) and trains to the losses of the
# key=value spelling, on 1 rank and under `ddpc run` on 2; a bare true/false flag turns its key
# on and "false" off; flags and key=value apply in argument order; a name two keys end in is
# refused listing them, whether both are in the file or only defaults; an unknown name is refused
# with the nearest flag; a bare flag that needs a value is refused. A refusal exits 2 with one
# line and leaves no run directory, so no value is ever dropped silently. docs/config.md's examples
# are these.
# usage: cli_train_flags.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cd "$tmp" || exit 1

# refused NAME WANT RUN_DIR COMMAND...: exits 2 with one stderr line holding WANT, and leaves no
# RUN_DIR behind.
refused() {
    local name=$1 want=$2 dir=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$tmp/err" && [ ! -e "$dir" ]; then
        ok "$name: $(cat "$tmp/err")"
    else
        fail "$name (exit $rc, $lines stderr lines, wanted '$want', $dir absent):" "$tmp/err"
    fi
}
# yaml_key FILE DOTTED: the value of a (one- or two-level) key in an effective config.yaml.
yaml_key() {
    local sec=- k=$2
    [[ $k == *.* ]] && sec=${k%%.*} k=${k#*.}
    awk -v s="$sec" -v k="$k" '/^[^ ]/ { cur = $1 } ((s == "-" && $1 == k ":") || (cur == s ":" && $1 == k ":")) { print $2; exit }' <"$1" # (a file operand "out=1/..." would be an awk assignment)
}
losses() { grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss": [0-9.]*' "$1/metrics.jsonl"; }

# 24 word pairs over 4 letters, so that data.min_freq 2 keeps every letter.
for w in ab ba abc cab dcba abcd bad dab cad acd bcd dbca aa bb cc dd abab cdcd adda bccb dcd aba \
    cbc dad; do
    echo "$w"
done >w.src
rev w.src >w.tgt
tr=("$src/configs/translate_demo.yaml" data.train_src=w.src data.train_tgt=w.tgt
    data.valid_src=null data.valid_tgt=null data.test_src=w.src data.test_tgt=w.tgt
    data.batch_size=8 max_steps=2 eval_every=0 log_every=1 optim.warmup_steps=1 num_threads=1)

# --- The guides' flags, each with a value that differs from translate_demo.yaml's and the default.
# flag, key, value; the flags of docs/config.md's paragraph on last names, and the three aliases.
cat >flags.txt <<'EOF'
--d_model model.d_model 64
--num_heads model.num_heads 2
--num_encoder_layers model.num_encoder_layers 1
--num_decoder_layers model.num_decoder_layers 1
--d_ff model.d_ff 24
--dropout model.dropout 0
--min_freq data.min_freq 2
--precision precision bf16
--eval_batches eval_batches 1
--max_len data.max_len 12
EOF
flags=() kv=()
while read -r f k v; do
    flags+=("$f" "$v")
    kv+=("$k=$v")
done <flags.txt
# --use_checkpoint is bare, followed by a key=value (so not its value); --mode test needs weights.
"$ddpc" train "${tr[@]}" "${flags[@]}" --use_checkpoint max_steps=3 weights_out=g.st run_dir=g \
    >g.log 2>&1
check_status "translate_demo.yaml with the guides' flags trains" $? g.log
while read -r f k v; do
    got=$(yaml_key g/config.yaml "$k")
    if [ "$got" = "$v" ]; then ok "$f $v sets $k"; else fail "$f $v sets $k: got '$got'"; fi
done <flags.txt
check "--max_len 12 is the data's, which model.max_len follows" \
    test "$(grep -c '^  max_len: 12$' g/config.yaml)" -eq 2
check "--use_checkpoint alone sets model.activation_checkpointing: true" \
    test "$(yaml_key g/config.yaml model.activation_checkpointing)" = true
check "... running bf16 matrix products" grep -q "^precision bf16" g.log
check "... and max_steps=3 after it still applies (3 steps logged)" test "$(losses g | wc -l)" -eq 3
"$ddpc" train "${tr[@]}" "${kv[@]}" model.activation_checkpointing=true max_steps=3 run_dir=k \
    >k.log 2>&1
check_status "the same run spelt key=value trains" $? k.log
check "... to the same losses, step by step" diff <(losses g) <(losses k)

# Every flag docs/config.md names in its paragraph on last names is one flags.txt runs.
/usr/bin/python3 - "$src/docs/config.md" >doc_flags.txt <<'PY'
import re, sys
text = " ".join(open(sys.argv[1]).read().split())
para = text.split("Every other key is a flag by its last name")[1].split("The last three flags")[0]
print("\n".join(sorted(set(re.findall(r"`(--[a-z_]+)[ `]", para)))))
PY
check "docs/config.md names 9 last-name flags" test "$(wc -l <doc_flags.txt)" -eq 9
check "... each one run above" diff doc_flags.txt <(cut -d' ' -f1 flags.txt | grep -vx -- --max_len | sort)

# --mode is the state: test the weights just trained; parallel.mode stays ddp.
"$ddpc" train "${tr[@]}" "${kv[@]}" --mode test --init_from g.st data.vocab_dir=g run_dir=m \
    >m.log 2>&1
check_status "--mode test --init_from g.st tests" $? m.log
check "... as state: test" test "$(yaml_key m/config.yaml state)" = test
check "... leaving parallel.mode ddp" test "$(yaml_key m/config.yaml parallel.mode)" = ddp
check "... logging a test evaluation" grep -q "^eval test" m.log

# Order, "false", dotted keys, --flag=VALUE and '-' for '_'.
"$ddpc" train "${tr[@]}" model.num_heads=4 --num-heads 2 --d_model 64 model.d_model=32 \
    --use_checkpoint false --optim.type sgd --parallel.mode=ddp --run_dir=out=1 >o.log 2>&1
check_status "--num-heads 2 after model.num_heads=4, --d_model 64 before model.d_model=32 train" \
    $? o.log
check "... the later of each: num_heads 2" test "$(yaml_key out=1/config.yaml model.num_heads)" = 2
check "... and d_model 32" test "$(yaml_key out=1/config.yaml model.d_model)" = 32
check "--use_checkpoint false turns it off" \
    test "$(yaml_key out=1/config.yaml model.activation_checkpointing)" = false
check "--optim.type sgd sets optim.type" test "$(yaml_key out=1/config.yaml optim.type)" = sgd
check "--run_dir=out=1 keeps its '=' (the run directory is out=1)" \
    test "$(yaml_key out=1/config.yaml run_dir)" = out=1

# Under `ddpc run`: every rank resolves the same flags.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${tr[@]}" "${flags[@]}" --use_checkpoint \
    run_dir=g2 >g2.log 2>&1
check_status "2 ranks under ddpc run with the guides' flags train" $? g2.log
check "... as one job of 2 ranks" grep -q "x 2 ranks x" g2.log
while read -r f k v; do
    got=$(yaml_key g2/config.yaml "$k")
    if [ "$got" = "$v" ]; then ok "... $f $v sets $k"; else fail "... $f $v sets $k: got '$got'"; fi
done <flags.txt

# --- Refusals: nothing runs, nothing is written.
refused "--type (data.type, model.type and optim.type in the file) is refused, listing them" \
    "flag '--type' is ambiguous: it could set 'data.type', 'model.type' or 'optim.type'; give the full key instead, as in '--data.type'" \
    r1 "$ddpc" train "${tr[@]}" --type adamw run_dir=r1
refused "--enabled (flight.enabled and loss_scale.enabled, both defaults) is refused, listing them" \
    "flag '--enabled' is ambiguous: it could set 'flight.enabled' or 'loss_scale.enabled'" \
    r2 "$ddpc" train "${tr[@]}" --enabled false run_dir=r2
refused "--d_modle 64 is an unknown flag, suggesting --d_model" \
    "unknown flag '--d_modle' (did you mean '--d_model'?" r3 \
    "$ddpc" train "${tr[@]}" --d_modle 64 run_dir=r3
refused "--use_checkpiont is an unknown flag, suggesting the alias --use_checkpoint" \
    "unknown flag '--use_checkpiont' (did you mean '--use_checkpoint'?" r4 \
    "$ddpc" train "${tr[@]}" --use_checkpiont run_dir=r4
refused "--d_model alone is refused: it needs a value" \
    "flag '--d_model' needs a value: key 'model.d_model' is not a true/false switch" r5 \
    "$ddpc" train "${tr[@]}" --d_model --dropout 0 run_dir=r5
refused "--mode alone is refused: it needs a value" "flag '--mode' needs a value" r6 \
    "$ddpc" train "${tr[@]}" --mode run_dir=r6
refused "ddpc plan refuses an ambiguous flag the same way" "flag '--type' is ambiguous" r7 \
    "$ddpc" plan "${tr[@]}" --type adamw run_dir=r7

# --- --help lists the aliases and the last-name rule.
"$ddpc" train --help >help.log 2>&1
check_status "ddpc train --help" $? help.log
for f in max_len:data.max_len use_checkpoint:model.activation_checkpointing mode:state; do
    check "... lists --${f%%:*} as ${f#*:}" grep -q -- "^  --${f%%:*}  *${f#*:}=VALUE$" help.log
done
check "... and the last-name rule" grep -q -- "^  --<last name> VALUE  *the one key" help.log

summary
