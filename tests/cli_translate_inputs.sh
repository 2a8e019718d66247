#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Awkward inputs of data.type translation through `ddpc train` (one process, a tiny seq2seq, each
# run well under a second): CRLF files and a missing final newline give the same vocabularies;
# empty lines, /dev/stdin and an empty file translate; a missing or directory predict.input,
# mismatched line counts, a NUL byte, a data.max_len nothing fits and a data.min_freq that keeps no token are
# one error naming the file or key; an input that never ends (/dev/zero, a line past 1 MiB, an
# endless pipe) is refused naming file and line within bounded time and memory; beam 64 over a 12-token vocabulary works and beam 1 is greedy;
# word-level translations longer than any fixed buffer come out whole, and a predict line of many
# bytes but few words translates; weights record their vocabularies' digests, and test, predict,
# init_from and resume refuse other vocabularies naming both files.
# usage: cli_translate_inputs.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cd "$tmp" || exit 1

/usr/bin/python3 - <<'EOF'
import random
random.seed(5)
for split, n in (("train", 200), ("test", 20)):
    with open(f"{split}.src", "w") as s, open(f"{split}.tgt", "w") as t:
        for _ in range(n):
            w = "".join(random.choice("abcdefgh") for _ in range(random.randint(2, 6)))
            s.write(w + "\n")
            t.write(w[::-1] + "\n")
# Word-level copy of sentences of up to 8 words of 40 letters: a translation of 327 bytes.
random.seed(4)
words = ["".join(random.choice("abcdefghijklmnop") for _ in range(40)) for _ in range(6)]
with open("w.src", "w") as s, open("w.tgt", "w") as t:
    for _ in range(300):
        line = " ".join(random.choice(words) for _ in range(random.randint(1, 8)))
        s.write(line + "\n")
        t.write(line + "\n")
EOF
head -n 20 w.src >wt.src
head -n 20 w.tgt >wt.tgt
cat >cfg.yaml <<EOF
seed: 7
num_threads: 1
epochs: 1
log:
  progress: plain
  tensorboard: false
model:
  type: seq2seq
  d_model: 16
  num_heads: 2
  num_encoder_layers: 1
  num_decoder_layers: 1
  d_ff: 32
  dropout: 0.0
data:
  type: translation
  train_src: train.src
  train_tgt: train.tgt
  test_src: test.src
  test_tgt: test.tgt
  tokenize: char
  max_len: 10
  batch_size: 16
optim:
  type: adamw
  lr: 0.003
EOF

# train NAME [KEY=VALUE...]: one process into run_dir NAME, log NAME.log; returns its status.
train() {
    local name=$1
    shift
    timeout 60 "$ddpc" train cfg.yaml run_dir="$name" "$@" >"$name.log" 2>&1
}
# refused NAME WHAT [KEY=VALUE...]: the run exits non-zero with one 'ddpc train:' line holding WHAT.
refused() {
    local name=$1 what=$2
    shift 2
    train "$name" "$@"
    local st=$?
    if [ "$st" -ne 0 ] && [ "$st" -lt 124 ] && grep -qF "ddpc train: " "$name.log" &&
        grep -F "ddpc train: " "$name.log" | grep -qF -- "$what"; then
        ok "$name: refused naming '$what'"
    else
        fail "$name: refused naming '$what' (exit $st)" "$name.log"
    fi
}
pred=(state=predict init_from=base.safetensors data.vocab_dir=base)

train base weights_out=base.safetensors
check_status "a tiny model trains" $? base.log

# CRLF files and files without a final newline read as the same lines.
sed 's/$/\r/' train.src >crlf.src
sed 's/$/\r/' train.tgt >crlf.tgt
head -c -1 train.src >nonl.src
train crlf data.train_src=crlf.src data.train_tgt=crlf.tgt
check_status "CRLF pair files train" $? crlf.log
check "CRLF: the same vocabularies as LF" cmp -s crlf/vocab.src.txt base/vocab.src.txt
train nonl data.train_src=nonl.src
check_status "a source file without its final newline trains" $? nonl.log
check "no final newline: the same vocabularies" cmp -s nonl/vocab.src.txt base/vocab.src.txt

# Empty lines: an empty pair trains; an empty predict line translates to one output line.
{ head -n 4 train.src; echo; tail -n +5 train.src; } >empty.src
{ head -n 4 train.tgt; echo; tail -n +5 train.tgt; } >empty.tgt
train empty data.train_src=empty.src data.train_tgt=empty.tgt
check_status "an empty line pair trains" $? empty.log
printf 'abc\r\n\nzzzz\nhgf' >in.txt
train p_in "${pred[@]}" predict.input=in.txt predict.output=p_in.txt
check_status "predict: CRLF, an empty line, unknown characters, no final newline" $? p_in.log
check "predict: one output line per input line" test "$(wc -l <p_in.txt)" -eq 4
echo abc | train p_stdin "${pred[@]}" predict.input=/dev/stdin predict.output=p_stdin.txt
check_status "predict.input /dev/stdin" $? p_stdin.log
check "predict from /dev/stdin: one line" test "$(wc -l <p_stdin.txt)" -eq 1
: >none.txt
train p_none "${pred[@]}" predict.input=none.txt predict.output=p_none.txt
check_status "predict: an empty input file" $? p_none.log
check "predict: an empty input file gives an empty output" test ! -s p_none.txt

# Beam search: 64 hypotheses over a vocabulary of 12 tokens, and beam 1 equals greedy.
train p_b64 "${pred[@]}" predict.beam_size=64 predict.output=p_b64.txt
check_status "predict.beam_size 64 > the vocabulary" $? p_b64.log
check "beam 64: one line per input" test "$(wc -l <p_b64.txt)" -eq 20
train p_g "${pred[@]}" predict.output=p_g.txt
train p_b1 "${pred[@]}" predict.beam_size=1 predict.output=p_b1.txt
check "beam 1 is greedy decoding" cmp -s p_g.txt p_b1.txt

# Refusals: one line naming the culprit, non-zero exit.
refused p_missing "/nonexistent/in.txt" "${pred[@]}" predict.input=/nonexistent/in.txt
refused p_dir "$tmp': it is a directory" "${pred[@]}" predict.input="$tmp"
echo abcdefghabcdefgh >long.txt
refused p_long "long.txt:1" "${pred[@]}" predict.input=long.txt
head -n 150 train.tgt >short.tgt
refused mismatch "short.tgt has 150" data.train_tgt=short.tgt
refused max_len_1 "data.max_len" data.max_len=1
refused max_len_2 "max_len 2" data.max_len=2
refused min_freq_all "data.min_freq 1000" data.min_freq=1000
# A run into a directory whose vocabularies were built with another min_freq says that, even when
# the tokens came out the same.
cp -r base again
refused again "again/vocab.src.txt was built with tokenize char and min_freq 1, but" \
    data.min_freq=2
# A NUL byte would be counted into a vocabulary that its own file could not hold back ('%s'
# stops at it): text files with one are refused naming the line.
{ head -n 2 train.src; printf 'ab\0cd\n'; tail -n +4 train.src; } >nul.src
refused nul_train "nul.src:3: a NUL byte" data.train_src=nul.src
printf 'abc\nd\0e\n' >nul.txt
refused nul_predict "nul.txt:2: a NUL byte" "${pred[@]}" predict.input=nul.txt
# An input that never ends is refused within bounded memory: /dev/zero at its first NUL byte; a
# line past 1 MiB (1,048,576 bytes) of text, or a pipe that never ends, at the limit for a line.
# Each run's peak RSS (GNU time's %M, KiB) stays far below what reading them whole would take.
rss_of() { sed -n 's/^maxrss_kb=//p' "$1"; }
# bounded NAME WHAT [KEY=VALUE...]: refused as `refused` says, within 60 s and 512 MiB.
bounded() {
    local name=$1 what=$2
    shift 2
    /usr/bin/time -f 'maxrss_kb=%M' -o "$name.rss" timeout 60 "$ddpc" train cfg.yaml \
        run_dir="$name" "$@" >"$name.log" 2>&1
    local st=$?
    if [ "$st" -ne 0 ] && [ "$st" -lt 124 ] && grep -F "ddpc train: " "$name.log" | grep -qF -- "$what"; then
        ok "$name: refused naming '$what'"
    else
        fail "$name: refused naming '$what' (exit $st)" "$name.log"
    fi
    check "$name: peak RSS $(rss_of "$name.rss") KiB < 512 MiB" test "$(rss_of "$name.rss")" -lt 524288
}
bounded p_zero "/dev/zero:1: a NUL byte" "${pred[@]}" predict.input=/dev/zero
bounded train_zero "/dev/zero:1: a NUL byte" data.train_src=/dev/zero
/usr/bin/python3 -c 'import sys; sys.stdout.write("abc\n" + "a" * (1 << 20) + "b\nabc\n")' >wide_a.txt
bounded p_wide_a "wide_a.txt:2: a line longer than 1048576 bytes" "${pred[@]}" predict.input=wide_a.txt
bounded train_wide_a "wide_a.txt:2: a line longer than" data.train_tgt=wide_a.txt
bounded p_endless "/dev/stdin:1: a line longer than" "${pred[@]}" predict.input=/dev/stdin \
    < <(yes abcdefgh | tr -d '\n')
# The weights record what their ids mean (the vocabularies' digests in __metadata__, checkpoints
# too): test, predict, init_from and resume with other vocabularies are refused naming both files;
# weights without the digests (older ddpc) are accepted.
meta() { /usr/bin/python3 -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n)).get("__metadata__", {}).get(sys.argv[2], ""))' "$@"; }
check "weights_out records the source vocabulary's digest" test -n "$(meta base.safetensors ddpc.vocab.src.crc32)"
check "... and the target's" test -n "$(meta base.safetensors ddpc.vocab.tgt.crc32)"
cp -r base swapped # ids 4 and 5 of the target vocabulary swapped, everything else the same
awk 'NR == 6 { six = $0; next } NR == 7 { print; print six; next } { print }' \
    base/vocab.tgt.txt >swapped/vocab.tgt.txt
check "the swapped vocabulary differs" bash -c '! cmp -s base/vocab.tgt.txt swapped/vocab.tgt.txt'
refused test_swapped "base.safetensors was trained with another target vocabulary" \
    state=test init_from=base.safetensors data.vocab_dir=swapped
check "naming the vocabulary files in use" grep -q \
    "vocabularies in use are swapped/vocab.src.txt and swapped/vocab.tgt.txt" test_swapped.log
refused predict_swapped "base.safetensors was trained with another target vocabulary" \
    state=predict init_from=base.safetensors data.vocab_dir=swapped predict.output=p_swapped.txt
check "... and writes no translations" test ! -e p_swapped.txt
# Training from them on another corpus (whose vocabularies differ): init_from, then resume.
head -n 120 train.src >other.src
head -n 120 train.tgt >other.tgt
refused init_other "base.safetensors was trained with another" init_from=base.safetensors \
    data.train_src=other.src data.train_tgt=other.tgt
train ck checkpoint.every_steps=4 max_steps=4
check_status "a checkpointed run" $? ck.log
check "its checkpoint's weights record the digests" \
    test -n "$(meta ck/checkpoints/"$(cat ck/checkpoints/latest)"/model.safetensors ddpc.vocab.tgt.crc32)"
refused resume_other "model.safetensors was trained with another" resume=ck/checkpoints \
    data.train_src=other.src data.train_tgt=other.tgt
check "... naming the checkpoint" grep -q "ck/checkpoints/step-0*4/model.safetensors was trained" \
    resume_other.log
check "... and the corpus" grep -q "the vocabularies in use are those of other.src and other.tgt" \
    resume_other.log
# The same weights without the digests, as ddpc wrote them before: accepted, as before.
/usr/bin/python3 -c 'import json, struct
raw = open("base.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h["__metadata__"] = {k: v for k, v in h["__metadata__"].items() if not k.startswith("ddpc.vocab")}
text = json.dumps(h).encode()
text += b" " * (-len(text) % 8)
open("old.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])'
train test_old state=test init_from=old.safetensors data.vocab_dir=swapped
check_status "weights without the digests are accepted (as before)" $? test_old.log
# Paths longer than the trainer keeps are refused, not cut short (the vocabularies went into a
# directory named by the first 511 bytes).
long=$tmp/$(printf 'd%.0s' $(seq 200))/$(printf 'e%.0s' $(seq 200))/$(printf 'f%.0s' $(seq 200))
refused vocab_dir_long "data.vocab_dir" data.vocab_dir="$long"
check "... and no directory made" test ! -e "$tmp/$(printf 'd%.0s' $(seq 200))"
refused output_long "predict.output" "${pred[@]}" predict.output="$long$long/t.txt"
cp -r base vocab_cut
rm vocab_cut/vocab.tgt.txt
refused vocab_pair "vocab_cut/vocab.tgt.txt does not" "${pred[@]}" data.vocab_dir=vocab_cut

# Word-level translations of 327 bytes reach predict.output whole (a copy task the model learns).
wcfg=(data.tokenize=word data.train_src=w.src data.train_tgt=w.tgt data.test_src=wt.src
    data.test_tgt=wt.tgt)
train words "${wcfg[@]}" epochs=30 optim.lr=0.01 weights_out=words.safetensors
check "word copy task: every test sentence exact" grep -q '"split": "test".*"exact_match": 1\.0*[,}]' \
    words/metrics.jsonl
train p_words "${wcfg[@]}" state=predict init_from=words.safetensors data.vocab_dir=words \
    predict.input=wt.src predict.output=p_words.txt
check_status "word-level predict" $? p_words.log
check "word-level translations longer than 300 bytes come out whole" cmp -s p_words.txt wt.tgt
/usr/bin/python3 -c 'print(" ".join(["q" * 600] * 9))' >wide.txt
train p_wide "${wcfg[@]}" state=predict init_from=words.safetensors data.vocab_dir=words \
    predict.input=wide.txt predict.output=p_wide.txt
check_status "predict: a line of 5,408 bytes in 9 words fits data.max_len 10" $? p_wide.log
check "predict: the wide line gives one output line" test "$(wc -l <p_wide.txt)" -eq 1
# A line of exactly the limit, 1 MiB (1,048,576 bytes) in 9 words, is read and translated.
/usr/bin/python3 -c 'w = ["q" * 116508] * 8; print(" ".join(w + ["q" * ((1 << 20) - 8 * 116509)]))' >edge.txt
train p_edge "${wcfg[@]}" state=predict init_from=words.safetensors data.vocab_dir=words \
    predict.input=edge.txt predict.output=p_edge.txt
check_status "predict: a line of exactly 1 MiB is accepted" $? p_edge.log
summary
