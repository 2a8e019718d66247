#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The translation demo end to end (issue #14): scripts/freedict_pairs.py extracts the FreeDict
# English-German pairs with the documented split; configs/translate_demo.yaml (shortened) trains
# on 2 ranks through `ddpc run`, and its test record's BLEU and exact match beat both trivial
# baselines (copy the source, most frequent translation), whose figures match an independent
# Python computation from the text files; `state: predict` translates a file of source lines
# (greedy: the same exact matches as the evaluation; beam 4), with the saved vocabularies;
# vocabularies that disagree with the config or corpus, or are missing, stop a run; a resumed run
# reloads and checks them.
# usage: cli_translate.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
ref="$py $src/tests/translate_ref.py"
cfg=$src/configs/translate_demo.yaml
# The demo shortened: 800 steps of 32 pairs per rank (51,200 pairs, under one epoch) without
# dropout, which learns faster per pair than the config's 64 with dropout.
short="max_steps=800 eval_every=800 data.batch_size=32 model.dropout=0"

"$py" "$src/scripts/freedict_pairs.py" "$tmp/pairs" >"$tmp/pairs.log" 2>&1
check_status "freedict_pairs.py extracts the pairs" $? "$tmp/pairs.log"
check "79049 train, 825 valid, 765 test pairs" grep -q "79049 train, 825 valid, 765 test pairs" "$tmp/pairs.log"
check "the split is CRC-32 of the word mod 100" $ref split "$tmp/pairs"
check "line-aligned files" test "$(wc -l <"$tmp/pairs/test.src")" -eq "$(wc -l <"$tmp/pairs/test.tgt")"
data="data.train_src=$tmp/pairs/train.src data.train_tgt=$tmp/pairs/train.tgt
      data.valid_src=$tmp/pairs/valid.src data.valid_tgt=$tmp/pairs/valid.tgt
      data.test_src=$tmp/pairs/test.src data.test_tgt=$tmp/pairs/test.tgt log.progress=plain"

# field NAME [RUN_DIR]: the value of NAME in the last test record of RUN_DIR/metrics.jsonl ($tmp/run).
field() { grep '"split": "test"' "${2:-$tmp/run}/metrics.jsonl" | tail -1 | sed 's/.*"'"$1"'": \([0-9.e+-]*\).*/\1/'; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 > b + 0) }'; }
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }

# shellcheck disable=SC2086
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" $data $short run_dir="$tmp/run" \
    weights_out="$tmp/w.safetensors" >"$tmp/train.log" 2>&1
check_status "the demo trains on 2 ranks" $? "$tmp/train.log"
grep -E "^(\[rank0\] )?(translation|eval|done)" "$tmp/train.log"
check "the start line counts the pairs left out" grep -q "translation: vocabularies of 30 source and 63 target chars (min_freq 1) in $tmp/run; 0 train pairs longer than data.max_len 24 left out" "$tmp/train.log"
check "vocabularies saved in the run directory" test -s "$tmp/run/vocab.src.txt" -a -s "$tmp/run/vocab.tgt.txt"
check "char vocabulary header" grep -q "^# ddpc vocab v1 tokenize=char min_freq=1 size=" "$tmp/run/vocab.tgt.txt"
check "the test record covers the test split" test "$(field eval_samples)" = 765
bleu=$(field bleu) copy=$(field bleu_copy) mf=$(field bleu_most_frequent)
em=$(field exact_match) em_copy=$(field exact_match_copy) em_mf=$(field exact_match_most_frequent)
echo "test: bleu $bleu (copy $copy, most frequent $mf), exact match $em (copy $em_copy, most frequent $em_mf)"
check "BLEU beats copying the source" gt "$bleu" "$copy"
check "... by 2 points or more" gt "$bleu" "$(awk -v c="$copy" 'BEGIN { print c + 2 }')"
check "BLEU beats the most frequent translation" gt "$bleu" "$mf"
check "exact match beats copying the source" gt "$em" "$em_copy"
check "exact match beats the most frequent translation" gt "$em" "$em_mf"

check "copying scores about 20 BLEU ($copy)" gt "$copy" 15
check "... and under 25" gt 25 "$copy"
check "the most frequent translation scores under 1 BLEU ($mf)" gt 1 "$mf"

# The baselines again, from the text files alone.
read -r b n _ < <($ref bleu "$tmp/pairs/test.src" "$tmp/pairs/test.tgt" "$tmp/run/vocab.tgt.txt")
check "copy baseline BLEU as computed in Python ($b)" near "$copy" "$b" 0.0001
check "copy baseline exact match as computed in Python" near "$em_copy" "$(awk -v n="$n" 'BEGIN { print n / 765 }')" 0.000001
$ref most_frequent "$tmp/pairs/train.src" "$tmp/pairs/train.tgt" "$tmp/pairs/test.src" "$tmp/mf.txt"
read -r b n _ < <($ref bleu "$tmp/mf.txt" "$tmp/pairs/test.tgt" "$tmp/run/vocab.tgt.txt")
check "most-frequent baseline BLEU as computed in Python ($b)" near "$mf" "$b" 0.0001

# state: predict, greedy: the translations of the test sources score as the evaluation did.
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/run" state=predict init_from="$tmp/w.safetensors" \
    predict.input="$tmp/pairs/test.src" predict.output="$tmp/greedy.txt" predict.beam_size=1 \
    >"$tmp/predict.log" 2>&1
check_status "state: predict translates a file" $? "$tmp/predict.log"
check "predict says what it wrote" grep -q "translated 765 lines of $tmp/pairs/test.src into $tmp/greedy.txt (beam 1)" "$tmp/predict.log"
check "one translation per line" test "$(wc -l <"$tmp/greedy.txt")" -eq 765
read -r b n _ < <($ref bleu "$tmp/greedy.txt" "$tmp/pairs/test.tgt" "$tmp/run/vocab.tgt.txt")
echo "predict (greedy): bleu $b, $n exact"
check "predicted translations: the evaluation's BLEU ($b vs $bleu)" near "$b" "$bleu" 0.5
check "predicted translations: the evaluation's exact matches" near "$n" "$(awk -v e="$em" 'BEGIN { print e * 765 }')" 2.01
printf 'nation\nhouse\n\n  information  \n' >"$tmp/words.txt"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/run" state=predict init_from="$tmp/w.safetensors" \
    predict.input="$tmp/words.txt" >"$tmp/predict4.log" 2>&1
check_status "predict with beam 4 (the config's) into run_dir/translations.txt" $? "$tmp/predict4.log"
check "four lines in, four out" test "$(wc -l <"$tmp/run/translations.txt")" -eq 4
sed 's/^/    /' "$tmp/run/translations.txt"

# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/run" state=predict init_from="$tmp/w.safetensors" \
    predict.beam_size=1 >"$tmp/predict_default.log" 2>&1
check_status "predict.input defaults to data.test_src" $? "$tmp/predict_default.log"
check "... all of it" test "$(wc -l <"$tmp/run/translations.txt")" -eq 765
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/beam" data.vocab_dir="$tmp/run" state=test \
    init_from="$tmp/w.safetensors" eval_beam_size=4 >"$tmp/beam.log" 2>&1
check_status "evaluation with eval_beam_size 4" $? "$tmp/beam.log"
check "... records BLEU and exact match" test -n "$(field bleu "$tmp/beam")" -a -n "$(field exact_match "$tmp/beam")"
echo "test with beam 4: bleu $(field bleu "$tmp/beam"), exact match $(field exact_match "$tmp/beam")"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/long" data.max_len=10 max_steps=1 >"$tmp/long.log" 2>&1
check "a test pair longer than data.max_len is an error naming its line" \
    grep -Eq "$tmp/pairs/test.(src|tgt):[0-9]+: the pair has [0-9]+ source and [0-9]+ target tokens; with <eos>/<bos> both must fit max_len 10" "$tmp/long.log"

# Vocabularies must match: a changed setting, a missing file, another tokenization.
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/run" data.min_freq=2 max_steps=1 >"$tmp/e1.log" 2>&1
check "training into a run with other vocabularies fails" test $? -ne 0
check "... naming the saved file and the setting" grep -q "$tmp/run/vocab.src.txt was built with tokenize char and min_freq 1, but the config says data.tokenize char and data.min_freq 2" "$tmp/e1.log"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/other" state=predict init_from="$tmp/w.safetensors" >"$tmp/e2.log" 2>&1
check "predict without vocabularies fails" grep -q "no vocabulary at $tmp/other/vocab.src.txt" "$tmp/e2.log"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/other" data.vocab_dir="$tmp/run" state=test \
    init_from="$tmp/w.safetensors" >"$tmp/test.log" 2>&1
check_status "state: test with data.vocab_dir pointing at the training run" $? "$tmp/test.log"
check "... scores as training's test on 1 rank" near "$(field bleu "$tmp/other")" "$bleu" 0.5
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data run_dir="$tmp/run" data.tokenize=word state=predict >"$tmp/e3.log" 2>&1
check "another tokenization is refused" grep -q "was built with tokenize char and min_freq 1, but the config says data.tokenize word" "$tmp/e3.log"

# Resume: a checkpointed run resumes with its saved vocabularies, and refuses edited ones.
small="model.d_model=32 model.num_heads=2 model.num_encoder_layers=1 model.num_decoder_layers=1
       model.d_ff=32 eval_every=0 eval_batches=1 data.eval_batch_size=16 checkpoint.every_steps=2
       optim.warmup_steps=0"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data $small run_dir="$tmp/res" max_steps=2 >"$tmp/r1.log" 2>&1
check_status "a short checkpointed run" $? "$tmp/r1.log"
cp "$tmp/res/vocab.tgt.txt" "$tmp/vocab.keep"
awk 'NR == 6 { a = $0; next } NR == 7 { print; print a; next } { print }' "$tmp/vocab.keep" >"$tmp/res/vocab.tgt.txt"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data $small run_dir="$tmp/res" max_steps=4 >"$tmp/r2.log" 2>&1
check "resuming with an edited vocabulary fails" grep -q "$tmp/res/vocab.tgt.txt (.* tokens) differs" "$tmp/r2.log"
cp "$tmp/vocab.keep" "$tmp/res/vocab.tgt.txt"
# shellcheck disable=SC2086
"$ddpc" train "$cfg" $data $small run_dir="$tmp/res" max_steps=4 >"$tmp/r3.log" 2>&1
check_status "resuming with the saved vocabularies" $? "$tmp/r3.log"
check "... from the step-2 checkpoint" grep -q '"event": "resume"' "$tmp/res/metrics.jsonl"
summary
