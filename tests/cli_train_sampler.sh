#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The training samplers through `ddpc train` and `ddpc run --nproc-per-node 2`: data.sampler
# (distributed, rank_split, case), data.drop_last, rank_split in ddpc's forms and the seed's
# (scalar left_index/right_index, integer down_sample_ratio, interleave streaming), checked on the
# indices each rank trained on as data.log_indices records them (<run_dir>/indices_rank<r>.txt,
# one line per pass: step, micro-step, task, indices); the refusals name the key.
# usage: cli_train_sampler.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cat >"$tmp/one.yaml" <<'YAML'
seed: 3
epochs: 1
log_every: 100
num_threads: 1
model:
  type: mlp
  hidden: [16]
data:
  type: synthetic_images
  size: 40
  batch_size: 2
  eval_batch_size: 20
  num_workers: 0
  log_indices: true
optim:
  type: sgd
  lr: 0.02
YAML
# visited DIR RANK: the indices rank RANK trained on, in order, on one line.
visited() { cut -d' ' -f4- "$1/indices_rank$2.txt" | tr '\n' ' ' | sed 's/ *$//'; }
# train NAME [OVERRIDES...] on 1 rank; train2 on 2 ranks through ddpc run.
train() { local n=$1; shift; "$ddpc" train "$tmp/one.yaml" run_dir="$tmp/$n" "$@" >"$tmp/$n.log" 2>&1; }
train2() {
    local n=$1; shift
    "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/one.yaml" run_dir="$tmp/$n" "$@" >"$tmp/$n.log" 2>&1
}
# same NAME GOT WANT
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi; }

# distributed (the default), in order: rank r takes entries r, r + 2, ... (torch's split).
train2 dist data.shuffle=false data.size=8
check_status "distributed on 2 ranks trains" $? "$tmp/dist.log"
same "distributed rank 0" "$(visited "$tmp/dist" 0)" "0 2 4 6"
same "distributed rank 1" "$(visited "$tmp/dist" 1)" "1 3 5 7"
check "only rank 0 logs: one test line" test "$(grep -c '^eval test' "$tmp/dist.log")" -eq 1
# Shuffled: every sample once per epoch over both ranks.
train2 shuf data.size=8
same "shuffled: both ranks together visit each sample once" \
    "$(cat "$tmp/shuf/indices_rank0.txt" "$tmp/shuf/indices_rank1.txt" | cut -d' ' -f4- | tr ' ' '\n' | sort -n | tr '\n' ' ')" \
    "0 1 2 3 4 5 6 7 "
# drop_last (the sampler's): 9 samples on 2 ranks, batch 1: padded to 5 per rank, or 4 with it.
train2 pad data.shuffle=false data.size=9 data.batch_size=1
same "no drop_last: rank 1 gets the padding (sample 0 again)" "$(visited "$tmp/pad" 1)" "1 3 5 7 0"
train2 drop data.shuffle=false data.size=9 data.batch_size=1 data.drop_last=true
same "drop_last: the tail is dropped" "$(visited "$tmp/drop" 1)" "1 3 5 7"

# rank_split, the seed's forms: dataset indices[2:][:24] = 2 .. 25, [::3] = 2 5 8 11 14 17 20 23.
seed=(data.sampler=rank_split data.shuffle=false data.left_index=2 data.right_index=23 data.down_sample_ratio=3)
train seed1 "${seed[@]}"
check_status "rank_split in the seed's form trains" $? "$tmp/seed1.log"
same "seed bounds + stride on 1 rank" "$(visited "$tmp/seed1" 0)" "2 5 8 11 14 17 20 23"
check "it trains: a test line" grep -q "^eval test step      4 | loss" "$tmp/seed1.log"
"$ddpc" train "$tmp/seed1/config.yaml" run_dir="$tmp/seed1b" >"$tmp/seed1b.log" 2>&1
check_status "its config.yaml runs again" $? "$tmp/seed1b.log"
same "... on the same samples" "$(visited "$tmp/seed1b" 0)" "2 5 8 11 14 17 20 23"
train plain max_steps=1
"$ddpc" train "$tmp/plain/config.yaml" run_dir="$tmp/plainb" >"$tmp/plainb.log" 2>&1
check_status "a distributed run's config.yaml (rank_split keys at their defaults) runs again" $? "$tmp/plainb.log"
train2 seed2 "${seed[@]}"
same "seed form, rank 0 of 2 (strided split)" "$(visited "$tmp/seed2" 0)" "2 8 14 20"
same "seed form, rank 1 of 2" "$(visited "$tmp/seed2" 1)" "5 11 17 23"
# ddpc's own forms for the same samples: half-open per-dataset lists and a fraction.
train ddpc1 data.sampler=rank_split data.shuffle=false 'data.left_index=[2]' 'data.right_index=[26]' data.down_sample_ratio=0.3333333333
same "ddpc's list bounds + ratio 1/3 give the same list" "$(visited "$tmp/ddpc1" 0)" "2 5 8 11 14 17 20 23"
# Streaming, batch 4 on 2 ranks: contiguous runs of whole batches (one dataset per task, so the
# interleave and round-robin orders are the dataset's own order).
train2 il data.sampler=rank_split data.left_index=2 data.right_index=23 data.down_sample_ratio=3 \
    data.streaming=interleave data.batch_size=4
check_status "interleave streaming on 2 ranks trains (shuffle off by default)" $? "$tmp/il.log"
same "interleave, rank 0" "$(visited "$tmp/il" 0)" "2 5 8 11"
same "interleave, rank 1" "$(visited "$tmp/il" 1)" "14 17 20 23"
train2 rr data.sampler=rank_split data.streaming=round_robin data.batch_size=4 data.size=16
same "round_robin, rank 1: the second half" "$(visited "$tmp/rr" 1)" "8 9 10 11 12 13 14 15"
train2 ilw data.sampler=rank_split data.left_index=2 data.right_index=20 data.down_sample_ratio=3 \
    data.streaming=interleave data.batch_size=4
same "interleave: a partial last batch wraps to the start" "$(visited "$tmp/ilw" 1)" "14 17 20 2"

# case: contiguous shares; 11 samples = 6 + 5, batches of 2 = 3 and 2: both ranks take 2 steps.
train2 case data.sampler=case data.size=11
check_status "case on 2 ranks trains" $? "$tmp/case.log"
same "case, rank 0 (its third batch dropped: the ranks agree on 2 steps)" "$(visited "$tmp/case" 0)" "0 1 2 3"
same "case, rank 1" "$(visited "$tmp/case" 1)" "6 7 8 9"

# Refusals.
train e1 data.left_index=3
check "rank_split keys need data.sampler: rank_split" \
    grep -q "key 'data.left_index' needs data.sampler: rank_split (it is distributed)" "$tmp/e1.log"
train e2 data.sampler=rank_split data.down_sample_ratio=2.5
check "a ratio neither a fraction nor an integer" \
    grep -q "key 'data.down_sample_ratio' must be a fraction in (0, 1] or an integer >= 2" "$tmp/e2.log"
train e3 data.sampler=rank_split data.left_index=3 'data.right_index=[9]'
check "scalar and list bounds mixed" grep -q "must both be lists" "$tmp/e3.log"
train e4 data.sampler=rank_split 'data.left_index=[50]'
check "a bound beyond the dataset names it and the size" \
    grep -q "data (40 training samples): rank_split sampler: left_index\[0\] = 50 is outside \[0, 40\]" "$tmp/e4.log"
train e5 data.sampler=rank_split data.streaming=interleave data.shuffle=true
check "streaming with shuffle refused" grep -q "shuffle must be off with streaming" "$tmp/e5.log"
summary
