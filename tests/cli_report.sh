#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ddpc report` end to end: a 2-rank run's metrics.jsonl becomes report.html whose SVG paths hold
# one point per logged step (loss, lr, throughput) and per evaluation, with no script and no URL;
# its summary table holds the run's final losses, accuracy, wall time, world size, precision,
# ZeRO stage and config file; evaluation losses are drawn in the training loss's chart and the
# accuracy over the same step axis; headless Chromium renders it to a screenshot with coloured
# curves across the whole width. A killed-and-restarted run's replayed step is drawn once, and
# its resume is marked on the charts and in the table. A rerun into the same run directory shows
# the last run only. A hand-made metrics.jsonl with the phase and per-rank keys
# checks the stacked bars and the per-rank chart, null values (a gap, not a point), a resumed
# run's replayed steps (superseded, not doubled), an absent key (a note, no empty chart) and a
# torn last line (skipped with a note); a GPU run's gpu_phase keys get a second stacked chart.
# A missing run directory or metrics.jsonl is one error line naming the path.
# usage: cli_report.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1

# points HTML KEY: "<data-points> <points in d>" of the line path whose data-key is KEY.
points() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
m = re.search(r'<path class="line" data-key="%s" data-points="(\d+)"[^>]* d="([^"]*)"' % re.escape(sys.argv[2]), html)
print(m.group(1), len(re.findall(r"[ML]", m.group(2))) if m else "none")
PY
}
# subpaths HTML KEY: the number of M commands (1 + gaps) of KEY's path.
subpaths() { grep -o "data-key=\"$2\" data-points=[^>]* d=\"[^\"]*\"" "$1" | grep -o M | wc -l; }
offline() { ! grep -Eiq 'https?:|<script|src=|href=|url\(|@import' "$1"; }
# xs HTML KEY: the x coordinates of KEY's points, one per line.
xs() { grep -o "data-key=\"$2\" data-points=[^>]* d=\"[^\"]*\"" "$1" | sed 's/.* d="//; s/"$//' |
    grep -oE '[ML][0-9.]+' | tr -d ML; }
# cell HTML KEY: the text of the summary table's row KEY (tags removed).
cell() { grep -o "<tr data-key=\"$2\">.*</tr>" "$1" | sed 's/<th>[^<]*<\/th>//; s/<[^>]*>//g'; }
# last_of FILE FILTER KEY: KEY's value in the last record of metrics.jsonl that FILTER accepts.
last_of() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = {"train": lambda r: "loss" in r and "split" not in r, "eval": lambda r: "split" in r}
print([r for r in recs if want[sys.argv[2]](r)][-1][sys.argv[3]])
PY
}

# A real run: 2 ranks, 50 steps, a line every 5, validation at 25 and 50, the test at the end.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" \
    data.type=synthetic_images data.size=2000 data.batch_size=16 max_steps=50 log_every=5 \
    eval_every=25 eval_batches=2 run_dir="$tmp/run" >"$tmp/run.log" 2>&1
check_status "2 ranks train" $? "$tmp/run.log"
"$ddpc" report "$tmp/run" >"$tmp/report.out" 2>&1
check_status "ddpc report RUN_DIR" $? "$tmp/report.out"
html=$tmp/run/report.html
check "it says where it wrote" grep -q "^wrote $tmp/run/report.html: [0-9]* charts from" "$tmp/report.out"
check "report.html exists" test -s "$html"
check "loss curve: 10 points" test "$(points "$html" loss)" = "10 10"
check "lr curve: 10 points" test "$(points "$html" lr)" = "10 10"
check "throughput curve: 10 points" test "$(points "$html" samples/s)" = "10 10"
check "validation loss: 2 points" test "$(points "$html" val/eval_loss)" = "2 2"
check "validation accuracy: 2 points" test "$(points "$html" val/eval_accuracy)" = "2 2"
check "test loss: 1 point" test "$(points "$html" test/eval_loss)" = "1 1"
check "the evaluation losses are drawn in the training loss's chart" \
    test "$(grep '<svg' "$html" | grep 'data-key="loss"' | grep -c 'data-key="val/eval_loss"')" -eq 1
# Steps 5, 10, ..., 50 on the loss curve; validation at 25 and 50: the same x in both charts.
check "validation at step 25 sits over training step 25" \
    test "$(xs "$html" val/eval_loss | head -1)" = "$(xs "$html" loss | sed -n 5p)"
check "the accuracy chart shares the step axis" \
    test "$(xs "$html" val/eval_accuracy | tr '\n' ' ')" = "$(xs "$html" val/eval_loss | tr '\n' ' ')"
loss=$(printf '%.4f' "$(last_of "$tmp/run/metrics.jsonl" train loss)")
check "summary: final training loss $loss at step 50" test "$(cell "$html" train_loss)" = "$loss at step 50"
loss=$(printf '%.4f' "$(last_of "$tmp/run/metrics.jsonl" eval eval_loss)")
check "summary: final test loss $loss" test "$(cell "$html" eval_loss)" = "$loss at step 50"
acc=$(/usr/bin/python3 -c "print('%.2f%%' % (100 * $(last_of "$tmp/run/metrics.jsonl" eval eval_accuracy)))")
check "summary: final test accuracy $acc" test "$(cell "$html" eval_accuracy)" = "$acc at step 50"
check "summary: the test split is named" grep -q '<th>final evaluation loss (test)</th>' "$html"
check "summary: wall time in seconds" grep -qE '<tr data-key="wall_time"><th>wall time</th><td>[0-9.]+ s</td>' "$html"
check "summary: world size" test "$(cell "$html" world)" = "2 ranks"
check "summary: precision" test "$(cell "$html" precision)" = "fp32"
check "summary: ZeRO stage" test "$(cell "$html" zero_stage)" = "0"
check "summary: config file" test "$(cell "$html" config)" = "$src/configs/fmnist_mlp.yaml"
check "summary: no resume" test "$(grep -c 'class="resume"' "$html")" -eq 0
check "the charts take the page's width" grep -q 'grid-template-columns:repeat(auto-fill' "$html"
check "memory bars drawn" grep -q 'class="hbar"' "$html"
check "an image model logs no tokens_per_s" test "$(grep -c tokens_per_s "$tmp/run/metrics.jsonl")" -eq 0
check "so its page has no tokens chart, nor a note about one" test "$(grep -c 'Tokens per second' "$html")" -eq 0
check "no script, no URL: nothing to fetch" offline "$html"
"$ddpc" report "$tmp/run" --out "$tmp/elsewhere.html" >"$tmp/out.out" 2>&1
check_status "--out FILE" $? "$tmp/out.out"
check "--out writes the same page" cmp -s "$html" "$tmp/elsewhere.html"

# Headless Chromium renders the page; the screenshot carries ink and the curves' colours.
if command -v chromium >/dev/null 2>&1; then
    timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/chrome" \
        --screenshot="$tmp/shot.png" --window-size=1200,2000 "file://$html" >"$tmp/chrome.log" 2>&1
    check_status "chromium renders report.html" $? "$tmp/chrome.log"
    read -r w h ink colour right < <(/usr/bin/python3 "$src/tests/lib/png_ink.py" "$tmp/shot.png")
    check "screenshot is 1200x2000 (${w:-?}x${h:-?})" test "${w:-0}x${h:-0}" = 1200x2000
    check "screenshot is not blank ($ink dark pixels, $colour coloured)" \
        test "${ink:-0}" -gt 5000 -a "${colour:-0}" -gt 5000
    check "curves reach the right quarter of the page ($right coloured pixels there)" \
        test "${right:-0}" -gt 1000
else
    fail "chromium is not installed (scripts/setup installs it)"
fi

# A killed and restarted run: rank 1 dies in step 28, the restart resumes from step 20's
# checkpoint and logs step 25 again; the curve keeps one point per step.
"$ddpc" run --nproc-per-node 2 --max-restarts 1 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" \
    data.type=synthetic_images data.size=2000 data.batch_size=16 max_steps=50 log_every=5 \
    checkpoint.every_steps=10 fault.kill_at_step=28 fault.kill_rank=1 run_dir="$tmp/killed" \
    >"$tmp/killed.log" 2>&1
check_status "a killed run restarts and finishes" $? "$tmp/killed.log"
check "its metrics.jsonl logs step 25 twice" test "$(grep -c '"step": 25, "epoch"' "$tmp/killed/metrics.jsonl")" -eq 2
"$ddpc" report "$tmp/killed" >"$tmp/killed.out" 2>&1
check_status "report of the killed-and-restarted run" $? "$tmp/killed.out"
check "its loss curve: 10 points, the replayed step once" test "$(points "$tmp/killed/report.html" loss)" = "10 10"
kh=$tmp/killed/report.html
check "the resume at step 20 is marked on the loss chart" \
    test "$(grep '<svg' "$kh" | grep 'data-key="loss"' | grep -c '<line class="resume" data-step="20"')" -eq 1
check "... and on every line chart, none elsewhere" \
    test "$(grep -o '<line class="resume" data-step="[0-9]*"' "$kh" | sort -u)" = '<line class="resume" data-step="20"'
check "the summary says where it resumed" test "$(cell "$kh" resumed)" = "step 20"
check "and sums the wall time of both sessions" grep -qE '<td>[0-9.]+ s in 2 sessions</td>' "$kh"

# A rerun into the same run directory that resumes nothing: the page shows the last run only.
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=2000 \
    data.batch_size=16 max_steps=20 log_every=5 resume=never run_dir="$tmp/killed" >"$tmp/rerun.log" 2>&1
check_status "a rerun into the same run directory trains" $? "$tmp/rerun.log"
"$ddpc" report "$tmp/killed" >"$tmp/rerun.out" 2>&1
check_status "report of the rerun" $? "$tmp/rerun.out"
check "its loss curve: the rerun's 4 points" test "$(points "$kh" loss)" = "4 4"
check "no resume marked: the rerun continued nothing" test "$(grep -c 'class="resume"' "$kh")" -eq 0
check "the summary: world 1, and the earlier run noted" \
    test "$(cell "$kh" world)" = "1 rank" -a "$(grep -c '<tr data-key="rerun">' "$kh")" -eq 1

# A hand-made run with every key of the step profile: 3 ranks, a null loss at step 10, a resume
# that replays steps 15 and 20, no grad_norm, and a last line torn by a kill.
mkdir -p "$tmp/fix"
phase() { printf '"phase": {"data_s": %s, "forward_s": %s, "backward_s": %s, "comm_exposed_s": %s, "optimizer_s": %s, "checkpoint_s": %s, "other_s": %s}' "$@"; }
{
    echo '{"step": 1, "mem_params_bytes": 1048576, "mem_grads_bytes": 1048576, "mem_rss_peak_bytes": 73891840}'
    for s in 5 10 15 20; do
        loss=$(awk -v s=$s 'BEGIN { print 2.5 - s / 10 }')
        [ $s = 10 ] && loss=null
        echo "{\"step\": $s, \"epoch\": 0, \"loss\": $loss, \"lr\": 0.01, \"samples_per_s\": 1000.5, \"tokens_per_s\": 64032.0, $(phase 0.001 0.02 0.04 0.005 0.003 0 0.001), \"step_s\": 0.07, \"comm_s\": 0.012, \"rank_step_s\": {\"0\": 0.07, \"1\": 0.071, \"2\": null}}"
    done
    echo '{"step": 10, "split": "val", "eval_loss": 1.9, "eval_accuracy": 0.5, "eval_samples": 100}'
    echo '{"step": 10, "event": "resume", "restart": 1, "checkpoint": "ckpt/step_10"}'
    for s in 15 20; do
        echo "{\"step\": $s, \"epoch\": 0, \"loss\": 0.9, \"lr\": 0.005, \"samples_per_s\": 990.0, \"tokens_per_s\": 63360.0, $(phase 0.001 0.02 0.04 0.005 0.003 0.2 0.001), \"step_s\": 0.27, \"comm_s\": 0.012, \"rank_step_s\": {\"0\": 0.27, \"1\": 0.26, \"2\": 0.28}}"
    done
    printf '{"step": 25, "epoch": 0, "loss": 0.8, "lr": 0.00'
} >"$tmp/fix/metrics.jsonl"
"$ddpc" report "$tmp/fix" >"$tmp/fix.out" 2>"$tmp/fix.err"
check_status "report of the hand-made run" $? "$tmp/fix.out" "$tmp/fix.err"
fx=$tmp/fix/report.html
check "the torn last line is skipped with a note" grep -q "note: skipped the torn last line of $tmp/fix/metrics.jsonl" "$tmp/fix.err"
check "the page says so too" grep -q "the last line was torn" "$fx"
check "one stacked bar per logged step" test "$(grep -o '<g class="bar"' "$fx" | wc -l)" -eq 4
check "each bar has its forward segment" test "$(grep -o 'class="seg" data-key="forward_s"' "$fx" | wc -l)" -eq 4
check "the replayed steps' checkpoint time replaced the first" test "$(grep -o 'class="seg" data-key="checkpoint_s"' "$fx" | wc -l)" -eq 2
check "every phase in the legend" grep -q '>comm_exposed_s</text>' "$fx"
for k in 0 1; do
    check "rank $k step times: 4 points" test "$(points "$fx" "rank $k")" = "4 4"
done
check "rank 2's nulls are no points" test "$(points "$fx" "rank 2")" = "2 2"
check "step_s and comm_s drawn" test "$(points "$fx" step_s)" = "4 4" -a "$(points "$fx" comm_s)" = "4 4"
check "a null loss is a gap: 3 points in 2 pieces" test "$(points "$fx" loss)" = "3 3" -a "$(subpaths "$fx" loss)" -eq 2
check "tokens/s drawn when it differs from samples/s" test "$(points "$fx" tokens/s)" = "4 4"
check "a single evaluation is one point" test "$(points "$fx" val/eval_loss)" = "1 1"
check "the hand-made run's resume at step 10 is marked" grep -q '<line class="resume" data-step="10"' "$fx"
check "metrics of an older ddpc: the setup rows say so" \
    test "$(grep -c 'not recorded (metrics of an older ddpc)' "$fx")" -eq 4
check "an absent key is a note, not an empty chart" grep -q 'Gradient norm (before clipping): not drawn, no record has &quot;grad_norm&quot;' "$fx"
check "no gradient-norm path" test "$(grep -c 'data-key="grad_norm"' "$fx")" -eq 0
check "the hand-made page is offline too" offline "$fx"

# A run of an older ddpc logged tokens_per_s = samples_per_s for images: one note, no second chart.
mkdir -p "$tmp/old"
for s in 5 10; do echo "{\"step\": $s, \"epoch\": 0, \"loss\": 1.5, \"samples_per_s\": 800.0, \"tokens_per_s\": 800.0}"; done >"$tmp/old/metrics.jsonl"
"$ddpc" report "$tmp/old" >"$tmp/old.out" 2>&1
check_status "report of an older image run" $? "$tmp/old.out"
check "tokens/s equal to samples/s is a note" grep -q 'Tokens per second: the same as samples per second' "$tmp/old/report.html"
check "not a chart" test "$(grep -c 'data-key="tokens/s"' "$tmp/old/report.html")" -eq 0

# A GPU run's records also carry gpu_phase/* (the device's time): a second stacked chart of them;
# the CPU runs above have none, and no note for it either.
check "a CPU run: no device-time chart, no note" test "$(grep -c 'on the GPU' "$fx")" -eq 0
mkdir -p "$tmp/gpu"
for s in 5 10 15; do
    echo "{\"step\": $s, \"epoch\": 0, \"loss\": 1.5, \"samples_per_s\": 800.0, $(phase 0.001 0.06 0.002 0 0.001 0 0.003), \"gpu_phase\": {\"forward_s\": 0.02, \"backward_s\": 0.04, \"comm_exposed_s\": 0, \"optimizer_s\": 0.003, \"other_s\": 0.004}, \"step_s\": 0.067}"
done >"$tmp/gpu/metrics.jsonl"
"$ddpc" report "$tmp/gpu" >"$tmp/gpu.out" 2>&1
check_status "report of a GPU run" $? "$tmp/gpu.out"
check "its device-time chart" \
    grep -q "<h2>Where a step's time goes on the GPU (device time)</h2>" "$tmp/gpu/report.html"
check "bars for both charts: 3 host, 3 device" \
    test "$(grep -o '<g class="bar"' "$tmp/gpu/report.html" | wc -l)" -eq 6

# Errors: one line naming the path, a non-zero exit.
"$ddpc" report "$tmp/nowhere" >"$tmp/e1.out" 2>&1
check "a missing run directory fails" test $? -ne 0
check "... naming it" grep -q "^ddpc report: run directory '$tmp/nowhere' does not exist$" "$tmp/e1.out"
check "... in one line" test "$(wc -l <"$tmp/e1.out")" -eq 1
mkdir -p "$tmp/empty"
"$ddpc" report "$tmp/empty" >"$tmp/e2.out" 2>&1
check "a run directory without metrics.jsonl fails" test $? -ne 0
check "... naming the file" grep -q "'$tmp/empty/metrics.jsonl' does not exist" "$tmp/e2.out"
check "... and writes no page" test ! -e "$tmp/empty/report.html"
"$ddpc" report >"$tmp/e3.out" 2>&1
check "no RUN_DIR is a usage error (2)" test $? -eq 2
summary
