#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# data.type tokens through `ddpc train` and `ddpc run`: llm.c token shards (uint16 version 1 and
# uint32 version 2) and nanoGPT's raw uint16 files, written here from the fortunes corpus by
# tests/lib/token_shards.py. A GPT on shards of the corpus's bytes trains to the same weights, bit
# for bit, as on the text itself (the shards are a byte-per-token copy, windows crossing shard
# boundaries included); 2 ranks train and resume bitwise; model.vocab_size widens the model;
# malformed shards each give one line naming the file.
# usage: cli_train_tokens.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
corpus=/usr/share/games/fortunes
shards=$src/tests/lib/token_shards.py
python3 "$shards" "$corpus" "$tmp/s_llmc" --shards 3
python3 "$shards" "$corpus" "$tmp/s_raw" --shards 2 --raw

cat >"$tmp/tok.yaml" <<YAML
seed: 7
epochs: 1
log_every: 5
eval_every: 10
eval_batches: 2
num_threads: 1
model:
  type: gpt
  n_layer: 1
  n_head: 2
  n_embd: 32
  block_size: 32
data:
  type: tokens
  train: $tmp/s_llmc/corpus_train_*.bin
  val: $tmp/s_llmc/corpus_val_*.bin
  batch_size: 8
optim:
  type: adamw
  lr: 0.003
  warmup_steps: 5
YAML
steps=(max_steps=40)

# run NAME COMMAND...: runs into $tmp/NAME (weights $tmp/NAME.st); passes when it exits 0.
run() {
    local name=$1
    shift
    "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.st" >"$tmp/$name.log" 2>&1
    check_status "$name trains" $? "$tmp/$name.log"
}

run llmc "$ddpc" train "$tmp/tok.yaml" "${steps[@]}"
check "config.yaml records the token data" grep -q "type: tokens" "$tmp/llmc/config.yaml"
check "validation runs on data.val" grep -q "eval val  step     10" "$tmp/llmc.log"
check "the final test falls back to data.val" grep -q "eval test step     40" "$tmp/llmc.log"
sed -e 's/type: tokens/type: text/' -e "s|train: .*|path: $corpus|" -e 's/val: .*/val_fraction: 0.1/' \
    "$tmp/tok.yaml" >"$tmp/text.yaml"
run text "$ddpc" train "$tmp/text.yaml" "${steps[@]}"
check "shards of the corpus's bytes train the weights the text trains (bitwise)" \
    cmp "$tmp/llmc.st" "$tmp/text.st"
run raw "$ddpc" train "$tmp/tok.yaml" "${steps[@]}" "data.train=$tmp/s_raw/corpus_train_*.bin" \
    "data.val=$tmp/s_raw/corpus_val_*.bin" data.format=uint16
check "raw uint16 files (nanoGPT) train the same weights" cmp "$tmp/llmc.st" "$tmp/raw.st"

# A test split of its own, and a wider vocabulary than the data's (llm.c pads 50257 to 50304).
run wide "$ddpc" train "$tmp/tok.yaml" max_steps=10 "data.test=$tmp/s_llmc/corpus_train_000002.bin" \
    model.vocab_size=300
check "data.test is the final test split" grep -q "eval test step     10" "$tmp/wide.log"
check "model.vocab_size 300 sizes the embedding" \
    grep -q "wte.weight.*300, 32\|vocab_size: 300" "$tmp/wide/config.yaml"

# Two ranks: trains, and a run killed at step 12 resumes from checkpoint 10 to the same weights.
two=("$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/tok.yaml" max_steps=20
     checkpoint.every_steps=5)
run two "${two[@]}"
"${two[@]}" fault.kill_at_step=12 run_dir="$tmp/killed" weights_out="$tmp/killed.st" \
    >"$tmp/killed.log" 2>&1
check "the 2-rank run is killed at step 12" test $? -ne 0
run killed "${two[@]}" fault.kill_at_step=12
check "the rerun resumes from step 10" grep -q "resuming from .*step-00000010" "$tmp/killed.log"
check "2 ranks: the resumed run ends with the uninterrupted run's weights" \
    cmp "$tmp/two.st" "$tmp/killed.st"

# configs/gpt2_124m.yaml is GPT-2 small: 124,439,808 parameters (GPT-2's count, embeddings tied).
"$ddpc" plan "$src/configs/gpt2_124m.yaml" "data.train=$tmp/s_llmc/corpus_train_*.bin" \
    "data.val=$tmp/s_llmc/corpus_val_*.bin" memory.limit_gb=1000 >"$tmp/plan.log" 2>&1
check_status "ddpc plan reads configs/gpt2_124m.yaml on shards" $? "$tmp/plan.log"
check "configs/gpt2_124m.yaml has GPT-2 small's 124,439,808 parameters" \
    grep -q "(124439808 parameters" "$tmp/plan.log"

# The shards are mapped, not read into memory: a 400 MB shard (sparse, 200M tokens of id 0) trains
# with a peak resident set far below its size, the check at start included: within 100 MiB of the
# same run on a 1 MB shard (the program's own share differs by build: a CUDA build maps cuBLAS).
python3 "$shards" --one "$tmp/huge.bin" --ids 0 --count 200000000
python3 "$shards" --one "$tmp/small.bin" --ids 0 --count 500000
truncate -s $((1024 + 400000000)) "$tmp/huge.bin"
truncate -s $((1024 + 1000000)) "$tmp/small.bin"
for size in small huge; do
    "$ddpc" train "$tmp/tok.yaml" "data.train=$tmp/$size.bin" model.block_size=512 max_steps=2 \
        eval_every=0 run_dir="$tmp/$size" >"$tmp/$size.log" 2>&1
    check_status "training on the $size shard works" $? "$tmp/$size.log"
done
peak_of() { sed -n 's/.*RSS .* (peak \([0-9.]*\) MiB).*/\1/p' "$tmp/$1.log" | head -n 1; }
base=$(peak_of small)
peak=$(peak_of huge)
check "the 400 MB shard's peak resident set ($peak MiB) is within 100 MiB of a 1 MB one's ($base)" \
    awk -v p="${peak:-1e9}" -v b="${base:-0}" 'BEGIN { exit !(b > 0 && p < b + 100) }'
rm -f "$tmp/huge.bin" "$tmp/small.bin"

# refuse NAME PATTERN EXTRA...: training on train shard(s) PATTERN exits non-zero with one line
# naming the file and matching EXTRA's regex ($3).
refuse() {
    local name=$1 pattern=$2 want=$3
    shift 3
    "$ddpc" train "$tmp/tok.yaml" "data.train=$pattern" run_dir="$tmp/bad" "$@" \
        >"$tmp/bad.out" 2>"$tmp/bad.err"
    local got=$?
    if [ $got -ne 0 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && grep -q -- "$want" "$tmp/bad.err"
    then ok "$name"; else fail "$name (exit $got)" "$tmp/bad.err"; fi
}
one() { python3 "$shards" --one "$@"; }
one "$tmp/magic.bin" --magic 20240521
refuse "a wrong magic is refused" "$tmp/magic.bin" "magic.bin: not an llm.c token shard.*data.format: uint16"
one "$tmp/version.bin" --version 3
refuse "version 3 is refused" "$tmp/version.bin" "version.bin: llm.c shard version 3"
one "$tmp/short.bin" --cut 7
refuse "a truncated shard is refused" "$tmp/short.bin" "short.bin: .*truncated"
one "$tmp/long.bin" --count 200
refuse "bytes past the header's count are refused" "$tmp/long.bin" "long.bin: .*trailing bytes"
one "$tmp/big.bin" --ids 1,2,3,256,4
refuse "an id >= model.vocab_size is refused with its position" "$tmp/big.bin" \
    "big.bin: token 3 is id 256, outside model.vocab_size 256"
one "$tmp/big.bin" --ids "$(seq -s, 0 299)"
"$ddpc" train "$tmp/tok.yaml" "data.train=$tmp/big.bin" model.vocab_size=300 max_steps=2 \
    run_dir="$tmp/big" >"$tmp/big.log" 2>&1
check_status "ids up to 299 train with model.vocab_size 300" $? "$tmp/big.log"
one "$tmp/u32.bin" --version 2 --ids "$(seq -s, 0 299)"
"$ddpc" train "$tmp/tok.yaml" "data.train=$tmp/u32.bin" model.vocab_size=300 max_steps=2 \
    run_dir="$tmp/u32" >"$tmp/u32.log" 2>&1
check_status "version 2 (uint32 tokens) trains" $? "$tmp/u32.log"
one "$tmp/odd.bin" --raw --cut 1
refuse "an odd-sized raw file is refused" "$tmp/odd.bin" "odd.bin: .*odd size" data.format=uint16
refuse "a pattern matching nothing is refused" "$tmp/none_*.bin" "none_\*.bin: no file matches"
one "$tmp/tiny.bin" --ids 1,2,3
refuse "fewer tokens than block_size+1 are refused" "$tmp/tiny.bin" "tiny.bin: 3 tokens"
: >"$tmp/empty.bin"
refuse "an empty file is refused" "$tmp/empty.bin" "empty.bin: empty file"
mkfifo "$tmp/fifo.bin"
refuse "a FIFO is refused, not waited on" "$tmp/fifo.bin" "fifo.bin.: it is a FIFO, not a regular file"
refuse "data.val is required" "$tmp/s_llmc/corpus_train_*.bin" "needs key 'data.val'" data.val=
summary
