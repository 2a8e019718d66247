#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The progress bar (log.progress), through a pseudo-terminal: on a terminal rank 0 redraws one
# line in place with \r and clear-to-end-of-line — steps done/total, epoch, loss, throughput, ETA —
# instead of the plain progress lines, and its final state ends with a newline; evaluation lines
# print above it. Not on a terminal (a file), with log.progress: plain, and under `ddpc run`
# (whose workers write to pipes) the plain lines are exactly as before; log.progress: bar draws it
# anywhere; an error while the bar is drawn starts its own line; a wrong value is an error
# naming the key.
# usage: cli_progress.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
pty_run() { /usr/bin/python3 "$src/tests/lib/pty_run.py" "$@"; }
args=("$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=2000
      data.batch_size=16 max_steps=50 log_every=5 eval_every=25 eval_batches=2)
plain_re='^step  *[0-9]*/50 | epoch 0 | loss [0-9.]* | lr [0-9.e+-]* | [0-9]* samples/s | [0-9.]* s$'
bar_re=$'\rstep [0-9]+/50 \\[[#.]{20}\\] +[0-9]+% \\| epoch 0 \\| loss ([0-9.]+|--) \\| ([0-9]+|--) samples/s \\| (ETA|took) [0-9hms-]+\e\\[K'
# plain_lines FILE: the progress lines of FILE, terminal line ends undone.
plain_lines() { tr -d '\r' <"$1" | grep -c "$plain_re"; }
no_escapes() { ! grep -q $'\e\\|\r$' "$1" && ! tr -d '\n' <"$1" | grep -q $'\r'; }

# On a terminal: the bar.
pty_run "$tmp/tty.out" "$ddpc" train "${args[@]}" run_dir="$tmp/tty"
check_status "trains on a terminal" $? "$tmp/tty.out"
check "no plain progress lines" test "$(plain_lines "$tmp/tty.out")" -eq 0
n=$(grep -aEo "$bar_re" "$tmp/tty.out" | wc -l)
check "the bar is redrawn in place ($n states with every field)" test "$n" -ge 10
check "its states reach 50/50" grep -aq $'\rstep 50/50 \\[####################\\] 100% | epoch 0 | loss [0-9.]* | [0-9]* samples/s | took ' "$tmp/tty.out"
check "the final state ends with a newline" grep -aEq $'\rstep 50/50 [^\r]*took [0-9hms]+\e\\[K\r?$' "$tmp/tty.out"
check "the bar shows the logged loss" grep -aq $'\rstep 5/50 \\[[#.]*\\]  *10% | epoch 0 | loss [0-9]\\.[0-9]\\{4\\} | [0-9]* samples/s | ETA ' "$tmp/tty.out"
check "evaluation lines print on their own line" grep -aq $'\e\\[Keval val  step     25 | loss' "$tmp/tty.out"
check "the test evaluation and the end are plain lines" grep -aq $'^eval test step     50 | loss .*\r$' "$tmp/tty.out"
check "metrics.jsonl is the same either way" test "$(grep -c '"loss"' "$tmp/tty/metrics.jsonl")" -eq 10

# Not a terminal: the lines of before, nothing else.
"$ddpc" train "${args[@]}" run_dir="$tmp/file" >"$tmp/file.out" 2>&1
check_status "trains into a file" $? "$tmp/file.out"
check "10 plain progress lines" test "$(plain_lines "$tmp/file.out")" -eq 10
check "no carriage return or escape in a file" no_escapes "$tmp/file.out"
check "the first line as before" grep -q '^step      5/50 | epoch 0 | loss [0-9.]* | lr ' "$tmp/file.out"

# log.progress: plain on a terminal; bar into a file.
pty_run "$tmp/plain.out" "$ddpc" train "${args[@]}" run_dir="$tmp/plain" log.progress=plain
check_status "log.progress=plain trains" $? "$tmp/plain.out"
check "log.progress=plain: 10 plain lines on a terminal" test "$(plain_lines "$tmp/plain.out")" -eq 10
check "log.progress=plain: no bar" test "$(grep -aEo "$bar_re" "$tmp/plain.out" | wc -l)" -eq 0
"$ddpc" train "${args[@]}" run_dir="$tmp/bar" log.progress=bar >"$tmp/bar.out" 2>&1
check_status "log.progress=bar trains" $? "$tmp/bar.out"
check "log.progress=bar: a bar even in a file" test "$(grep -aEo "$bar_re" "$tmp/bar.out" | wc -l)" -ge 10
check "log.progress=bar: no plain lines" test "$(plain_lines "$tmp/bar.out")" -eq 0

# ddpc run on a terminal: its workers write to pipes, so rank 0 prints the plain lines.
pty_run "$tmp/run.out" "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${args[@]}" run_dir="$tmp/run"
check_status "ddpc run trains on a terminal" $? "$tmp/run.out"
check "ddpc run: 10 plain lines" test "$(plain_lines "$tmp/run.out")" -eq 10
check "ddpc run: no bar" test "$(grep -aEo "$bar_re" "$tmp/run.out" | wc -l)" -eq 0

# A run that fails while the bar is drawn: the error starts a line of its own.
pty_run "$tmp/nan.out" "$ddpc" train "${args[@]}" run_dir="$tmp/nan" optim.type=sgd optim.lr=10 \
    optim.grad_clip=0 log_every=1
check "a diverging run fails on a terminal" test $? -ne 0
check "its error starts a line of its own" grep -aq '^ddpc train: step [0-9]*: the loss' "$tmp/nan.out"
check "after the bar's last state" grep -aEq $'\rstep [0-9]+/50 [^\r]*\e\\[K\r?$' "$tmp/nan.out"

"$ddpc" train "${args[@]}" run_dir="$tmp/bad" log.progress=fancy >"$tmp/bad.out" 2>&1
check "a wrong log.progress fails" test $? -ne 0
check "... naming the key" grep -q "log.progress" "$tmp/bad.out"
summary
