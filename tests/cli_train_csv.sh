#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# data.type csv and the losses besides cross-entropy through `ddpc train` (docs/data.md,
# docs/losses.md): linear regression (loss mse, model.hidden: []) on a CSV of a known linear
# function plus noise recovers its coefficients within 1e-2; 2 ranks x 16 equal 1 rank x 32;
# a killed regression run resumes bit for bit; l1 and smooth_l1 train; bce_logits on multi-label
# columns trains; classification from a CSV; metrics report RMSE/MAE for regression; every bad file
# and refused combination gives one line naming the culprit and a non-zero exit.
# usage: cli_train_csv.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: Debian's python3-numpy is not installed (scripts/setup installs it)"
    exit 77
fi

# y = 1.5 x1 - 2 x2 + 0.5 x3 + 0.25 (+ noise of std 0.01); z = -x1 + 3 (a second target); labels
# a = x1 > 0, b = x1 + x2 > 0 (multi-label); cls = 0, 1, 2 by x1's third. train.csv has CRLF line
# ends and a quoted header; val.csv a blank line and a trailing newline.
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
w, b = np.array([1.5, -2.0, 0.5]), 0.25
def write(name, n, eol, header):
    x = rng.normal(size=(n, 3))
    y = x @ w + b + rng.normal(scale=0.01, size=n)
    z = -x[:, 0] + 3
    a, bb = (x[:, 0] > 0).astype(int), (x[:, 0] + x[:, 1] > 0).astype(int)
    cls = np.digitize(x[:, 0], [-0.43, 0.43])
    rows = [header] + [",".join(f"{v:.9g}" for v in (*x[i], y[i], z[i]))
                       + f",{a[i]},{bb[i]},{cls[i]}" for i in range(n)]
    with open(f"{out}/{name}.csv", "w", newline="") as f:
        f.write(eol.join(rows[:n // 2]) + eol + eol + eol.join(rows[n // 2:]) + eol)
write("train", 512, "\r\n", '"x1","x2",x3,"y",z,a,b,"cls"')
write("val", 128, "\n", "x1,x2,x3,y,z,a,b,cls")
write("test", 128, "\n", "x1,x2,x3,y,z,a,b,cls")
PY
d=$tmp
# Every target column but the label(s) would be a feature: the regression files without them.
cut -d, -f1-4 "$d/train.csv" >"$d/reg_train.csv"
cut -d, -f1-4 "$d/val.csv" >"$d/reg_val.csv"
cat >"$tmp/reg.yaml" <<YAML
seed: 3
epochs: 12
log_every: 16
num_threads: 1
loss: mse
model:
  type: mlp
  hidden: []
data:
  type: csv
  train: $d/reg_train.csv
  val: $d/reg_val.csv
  label: y
  batch_size: 32
optim:
  type: adamw
  lr: 0.05
checkpoint:
  every_steps: 20
YAML

# train NAME RANKS ARGS...: trains into $tmp/NAME with weights $tmp/NAME.st; returns its status.
train() {
    local name=$1 ranks=$2
    shift 2
    local cmd=("$ddpc" train "$tmp/reg.yaml" "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.st")
    if [ "$ranks" -gt 1 ]; then
        "$ddpc" run --nproc-per-node "$ranks" -- "${cmd[@]}" >>"$tmp/$name.log" 2>&1
    else
        "${cmd[@]}" >>"$tmp/$name.log" 2>&1
    fi
}
# weights FILE: "name=v1,v2,..." per tensor, one line each.
weights() {
    "$py" - "$1" <<'PY'
import json, struct, sys
import numpy as np
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", d[:8])[0]
for k, v in json.loads(d[8:8 + n]).items():
    if k != "__metadata__":
        b, e = v["data_offsets"]
        print(k + "=" + ",".join(f"{x:.6f}" for x in np.frombuffer(d[8 + n + b:8 + n + e], "<f4")))
PY
}
# maxdiff A B: the largest over tensors of max|a - b| / max(max|b|, 1e-6).
maxdiff() {
    "$py" - "$1" "$2" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    d = open(p, "rb").read()
    n = struct.unpack("<Q", d[:8])[0]
    h = json.loads(d[8:8 + n])
    return {k: np.frombuffer(d[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4")
            for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys()
print(max(float(np.max(np.abs(a[k] - b[k])) / max(float(np.max(np.abs(b[k]))), 1e-6)) for k in a))
PY
}
# near FILE NAME WANT...: tensor NAME's values are each within 1e-2 of WANT.
near() {
    local line
    line=$(weights "$1" | grep "^$2=") || return 1
    "$py" - "$line" "${@:3}" <<'PY'
import sys
got = [float(v) for v in sys.argv[1].split("=")[1].split(",")]
want = [float(v) for v in sys.argv[2:]]
sys.exit(not (len(got) == len(want) and all(abs(g - w) <= 1e-2 for g, w in zip(got, want))))
PY
}

# test_accuracy RUN_DIR: eval_accuracy of the run's last test evaluation.
test_accuracy() {
    grep '"split": "test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_accuracy": \([0-9.]*\).*/\1/'
}

train one 1
check_status "linear regression from a CSV (CRLF, quoted header) trains" $? "$tmp/one.log"
check "... recovers the weights 1.5, -2, 0.5 within 1e-2 ($(weights "$tmp/one.st" | sed -n 1p))" \
    near "$tmp/one.st" fc.0.weight 1.5 -2.0 0.5
check "... and the bias 0.25 within 1e-2 ($(weights "$tmp/one.st" | sed -n 2p))" \
    near "$tmp/one.st" fc.0.bias 0.25
last=$(grep '"split": "test"' "$tmp/one/metrics.jsonl" | tail -1)
check "metrics.jsonl reports eval_rmse and eval_mae, no accuracy ($last)" \
    bash -c "[[ '$last' == *eval_rmse* && '$last' == *eval_mae* && '$last' != *accuracy* ]]"
check "... the RMSE is the square root of the MSE loss, near the noise's 0.01" "$py" -c "
import json, sys; r = json.loads(sys.argv[1])
sys.exit(not (abs(r['eval_rmse'] ** 2 - r['eval_loss']) <= 1e-6 and r['eval_rmse'] < 0.02))" "$last"
check "TensorBoard gets the regression metrics" bash -c "grep -aq eval_rmse '$tmp'/one/tb/*"
check "the log's eval line shows rmse and mae" grep -q "| rmse .* | mae " "$tmp/one.log"

train two 2 data.batch_size=16
check_status "2 ranks x 16 train the regression" $? "$tmp/two.log"
dd=$(maxdiff "$tmp/two.st" "$tmp/one.st")
check "2 ranks x 16 equal 1 rank x 32 (max relative difference $dd)" \
    awk -v d="$dd" 'BEGIN { exit !(d <= 1e-5) }'

(train kill 1 fault.kill_at_step=50) 2>/dev/null
check "a regression run is killed at step 50" test $? -ne 0
train kill 1 fault.kill_at_step=50
check "... the rerun resumes from step 40" grep -q "resuming from .*step-00000040" "$tmp/kill.log"
check "... to the uninterrupted run's weights, bit for bit" cmp "$tmp/kill.st" "$tmp/one.st"

train pred 1 state=predict init_from="$tmp/one.st" predict.samples=5
check_status "state=predict runs a regression model" $? "$tmp/pred.log"
check "... predictions.csv has each sample's target and prediction" "$py" -c "
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
sys.exit(not (len(rows) == 5 and all(abs(float(r['target_0']) - float(r['predicted_0'])) < 0.05
                                     for r in rows)))" "$tmp/pred/predictions.csv"

for l in l1 smooth_l1; do
    train "$l" 1 loss=$l
    check_status "loss $l trains the regression" $? "$tmp/$l.log"
    check "... to the weights within 1e-2" near "$tmp/$l.st" fc.0.weight 1.5 -2.0 0.5
done
train beta 1 loss=smooth_l1 loss_beta=0.1 epochs=1
check_status "smooth_l1 takes loss_beta" $? "$tmp/beta.log"
train beta_bad 1 loss=smooth_l1 loss_beta=-1 epochs=1
check "a negative loss_beta is refused" grep -q "key 'loss_beta' must be a number in \[0" \
    "$tmp/beta_bad.log"

# Two regression targets: the output width follows the label columns.
cut -d, -f1-5 "$d/train.csv" >"$d/reg2_train.csv"
cut -d, -f1-5 "$d/val.csv" >"$d/reg2_val.csv"
train two_targets 1 data.train="$d/reg2_train.csv" data.val="$d/reg2_val.csv" data.label=y,z
check_status "two target columns (data.label: y,z) train" $? "$tmp/two_targets.log"
check "... into 2 outputs: fc.0.weight of y then z" \
    near "$tmp/two_targets.st" fc.0.weight 1.5 -2.0 0.5 -1 0 0

# Multi-label: bce_logits on columns a and b (features x1..x3).
cut -d, -f1-3,6,7 "$d/train.csv" >"$d/ml_train.csv"
cut -d, -f1-3,6,7 "$d/val.csv" >"$d/ml_val.csv"
train ml 1 loss=bce_logits data.train="$d/ml_train.csv" data.val="$d/ml_val.csv" data.label=a,b \
    'model.hidden=[16]'
check_status "bce_logits on multi-label columns trains" $? "$tmp/ml.log"
acc=$(test_accuracy "$tmp/ml")
check "... to a per-label accuracy above 0.95 ($acc)" awk -v a="$acc" 'BEGIN { exit !(a > 0.95) }'

# Classification from a CSV: integer labels 0..2, cross_entropy.
cut -d, -f1-3,8 "$d/train.csv" >"$d/cls_train.csv"
cut -d, -f1-3,8 "$d/test.csv" >"$d/cls_test.csv"
train cls 1 loss=cross_entropy data.train="$d/cls_train.csv" data.val=null \
    data.test="$d/cls_test.csv" data.label=cls 'model.hidden=[16]'
check_status "classification from a CSV (labels 0..2) trains" $? "$tmp/cls.log"
acc=$(test_accuracy "$tmp/cls")
check "... to an accuracy above 0.9 ($acc)" awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }'

# README.md's command line, on the regression files.
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=csv data.train="$d/reg_train.csv" \
    data.val="$d/reg_val.csv" data.label=y loss=mse epochs=3 num_threads=1 run_dir="$tmp/readme" \
    >"$tmp/readme.log" 2>&1
check_status "README's CSV regression command trains" $? "$tmp/readme.log"
check "... and reports its test RMSE" grep -q '"split": "test".*"eval_rmse"' "$tmp/readme/metrics.jsonl"

# bad NAME WANT FILE_TEXT [ARGS...]: a run on train file $tmp/NAME.csv holding FILE_TEXT fails
# with exactly one line on stderr, containing WANT, and writes no run directory.
bad() {
    local name=$1 want=$2 text=$3
    shift 3
    printf '%b' "$text" >"$tmp/$name.csv"
    "$ddpc" train "$tmp/reg.yaml" data.train="$tmp/$name.csv" run_dir="$tmp/bad_$name" "$@" \
        >"$tmp/bad_$name.out" 2>"$tmp/bad_$name.err"
    local st=$?
    if [ $st -ne 0 ] && [ "$(wc -l <"$tmp/bad_$name.err")" -eq 1 ] &&
        grep -qF -- "$want" "$tmp/bad_$name.err" && [ ! -e "$tmp/bad_$name/metrics.jsonl" ]; then
        ok "$name: one line naming it ($(cat "$tmp/bad_$name.err"))"
    else
        fail "$name: wanted one line with '$want' and a non-zero exit (exit $st)" \
            "$tmp/bad_$name.err"
    fi
}
bad nonnum "$tmp/nonnum.csv:3: column 2 ('x2'): 'abc' is not a number" \
    'x1,x2,x3,y\n1,2,3,4\n1,abc,3,4\n'
bad nolabel "$tmp/nolabel.csv:1: no label column 'y' in the header" 'x1,x2,x3,w\n1,2,3,4\n'
bad fields "$tmp/fields.csv:3: 3 fields, but the header has 4" 'x1,x2,x3,y\n1,2,3,4\n1,2,3\n'
bad empty "$tmp/empty.csv: the file is empty" ''
bad header_only "$tmp/header_only.csv: a header row and no data rows" 'x1,x2,x3,y\r\n'
bad emptycell "$tmp/emptycell.csv:2: column 3 ('x3'): '' is not a number" 'x1,x2,x3,y\n1,2,,4\n'
bad inf "$tmp/inf.csv:2: column 1 ('x1'): 'inf' is not a finite number" 'x1,x2,x3,y\ninf,2,3,4\n'
bad quote "$tmp/quote.csv:2: a quote opened here is never closed" 'x1,x2,x3,y\n"1,2,3,4\n'
bad class "$tmp/class.csv:3: column 4 ('y'): label 1.5 is not a class" \
    'x1,x2,x3,y\n1,2,3,1\n1,2,3,1.5\n' loss=cross_entropy
bad prob "$tmp/prob.csv:2: column 4 ('y'): target 2 is outside [0, 1]" 'x1,x2,x3,y\n1,2,3,2\n' \
    loss=bce_logits
bad several "class labels come from one column, not 2" 'x1,x2,x3,y\n1,2,3,1\n' \
    loss=cross_entropy data.label=x3,y
bad missing_file "cannot open CSV file '$tmp/nowhere.csv'" '' data.train="$tmp/nowhere.csv"
bad heldout "$d/val.csv: 7 feature columns, but the train file $tmp/heldout.csv has 3" \
    'x1,x2,x3,y\n1,2,3,4\n' data.val="$d/val.csv"
bad fmnist "loss 'mse' needs float targets (data.type csv with data.label); data.type \
synthetic_images has class labels" \
    '' data.type=synthetic_images data.train=null data.val=null data.label=null
bad gpt "loss 'l1' needs model type mlp or cnn; 'gpt' trains with cross_entropy only" '' \
    loss=l1 model.type=gpt data.type=synthetic_tokens data.train=null data.val=null \
    data.label=null model.hidden=null
bad dp "loss 'mse' needs DDP; parallel.mode: dp splits class labels only" \
    'x1,x2,x3,y\n1,2,3,4\n' parallel.mode=dp parallel.replicas=2
# ddpc bench step times models on float targets too: the regression and the multi-label MLP.
"$ddpc" bench step "$tmp/reg.yaml" bench.steps=3 bench.warmup=1 >"$tmp/bench.out" \
    2>"$tmp/bench.err"
check "ddpc bench step times the regression (mse) MLP" \
    grep -Eq '"bench": "step", "config": "reg", .*"samples_per_s": [1-9]' "$tmp/bench.out"
"$ddpc" bench step "$tmp/reg.yaml" loss=bce_logits data.train="$d/ml_train.csv" \
    data.val="$d/ml_val.csv" data.label=a,b bench.steps=3 bench.warmup=1 \
    >"$tmp/bench_ml.out" 2>"$tmp/bench_ml.err"
check "ddpc bench step times the multi-label (bce_logits) MLP" \
    grep -Eq '"bench": "step", .*"samples_per_s": [1-9]' "$tmp/bench_ml.out"
summary
