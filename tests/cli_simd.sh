#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The portable build's run-time ISA choice (include/ddpc/simd.h) where users meet it: `ddpc env`
# names the variant in use and the best one here, DDPC_CPU_ISA caps it (a cap above the CPU is
# lowered, a typo is an error), the default build carries no -march=native, and training under
# every cap this CPU runs gives the uncapped run's losses and weights to rounding.
# usage: cli_simd.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1

isa_row() { "$ddpc" env | sed -n 's/^ *Kernels ISA: *//p'; }
row=$(DDPC_CPU_ISA= isa_row)
if [[ $row == as\ built* ]]; then
    # A -DDDPC_NATIVE=ON (or non-x86) build: one variant; nothing below applies.
    check "a native build says it has one variant" test -n "$row"
    summary
    exit
fi
best=$(sed -n 's/.*best here: \([a-z0-9]*\);.*/\1/p' <<<"$row")
active=${row%% *}
check "ddpc env names the variant in use and the best here ($row)" test -n "$best"
check "uncapped, the best variant runs" test "$active" = "$best"
check "the default build is portable (no -march=native)" \
    bash -c "'$ddpc' env | grep -q 'SIMD (build): *baseline only'"
# What this CPU runs, from its flags: the variants' -march levels need these features.
want=baseline
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo && want=avx2
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
    grep -qw avx512dq /proc/cpuinfo && want=avx512
check "the best variant matches /proc/cpuinfo ($best vs $want)" test "$best" = "$want"

levels=(baseline avx2 avx512)
for cap in "${levels[@]}"; do
    got=$(DDPC_CPU_ISA=$cap isa_row)
    got=${got%% *}
    expect=$cap
    # A cap above what the CPU runs is lowered to the best.
    case "$best:$cap" in baseline:avx2 | baseline:avx512 | avx2:avx512) expect=$best ;; esac
    check "DDPC_CPU_ISA=$cap runs $expect (ddpc env says $got)" test "$got" = "$expect"
done
DDPC_CPU_ISA=sse3 "$ddpc" env >"$tmp/bad.out" 2>"$tmp/bad.err"
check "an unknown DDPC_CPU_ISA exits 2" test $? -eq 2
check "naming the value and the choices" \
    grep -q "DDPC_CPU_ISA='sse3' is not one of baseline, avx2, avx512" "$tmp/bad.err"

# Training under each cap: the GPT (gelu, layernorm, attention, adamw, dropout) and the MLP
# (relu, sgd). Losses to 1e-4 relative; weights to 1e-4 (MLP, SGD) and 2e-3 (GPT: AdamW's first
# steps divide by sqrt(v), so a rounding-sized gradient difference where gradients are near zero
# moves a weight by a visible fraction of lr; measured 4.6e-4 at worst).
train() { # NAME CAP CONFIG ARGS...
    local name=$1 cap=$2 cfg=$3
    shift 3
    DDPC_CPU_ISA=$cap "$ddpc" train "$src/configs/$cfg" "$@" log_every=1 num_threads=1 \
        run_dir="$tmp/$name" weights_out="$tmp/$name.st" >"$tmp/$name.log" 2>&1 ||
        fail "$name trains" "$tmp/$name.log"
    grep '"loss"' "$tmp/$name/metrics.jsonl" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/' >"$tmp/$name.loss"
}
gpt=(max_steps=4 optim.warmup_steps=1 eval_every=1000 eval_batches=1 test_batches=1 model.dropout=0.1)
mlp=(data.type=synthetic_images data.size=512 max_steps=4 eval_every=1000 eval_batches=1 test_batches=1)
train gpt_all "" gpt_fortunes.yaml "${gpt[@]}"
train mlp_all "" fmnist_mlp.yaml "${mlp[@]}"
for cap in "${levels[@]}"; do
    train "gpt_$cap" "$cap" gpt_fortunes.yaml "${gpt[@]}"
    train "mlp_$cap" "$cap" fmnist_mlp.yaml "${mlp[@]}"
    for m in gpt mlp; do
        check "$m under $cap: losses as uncapped (1e-4)" /usr/bin/python3 - "$tmp/${m}_$cap.loss" \
            "$tmp/${m}_all.loss" <<'PY'
import sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
sys.exit(not (len(a) == len(b) == 4 and all(abs(x - y) <= 1e-4 * max(1, abs(y)) for x, y in zip(a, b))))
PY
        tol=1e-4
        [ $m = gpt ] && tol=2e-3
        check "$m under $cap: weights as uncapped ($tol)" /usr/bin/python3 \
            "$src/tests/weights_close.py" "$tmp/${m}_$cap.st" "$tmp/${m}_all.st" $tol
    done
done
check "the best variant uncapped equals the capped-at-best run bit for bit" \
    cmp "$tmp/gpt_all.st" "$tmp/gpt_$best.st"
summary
