#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# step_bench.sh DDPC_BIN: fp32 training-step throughput of ddpc vs PyTorch 1.13 (same models,
# same batch, same optimizer) at 1 and 2 threads, next to OpenBLAS's sgemm peak.
# Every peer gets the environment /work/shared/PEERS.md asks for, in the same run as ddpc.
# Prints a Markdown table on stdout; the raw JSON lines go to stderr.
# Environment: THREADS (default "1 2"), MODELS (default "gpt mlp cnn seq2seq"), STEPS (default 20),
# PYTHON (default /usr/bin/python3, which has Debian's python3-torch).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DDPC_BIN" >&2
    exit 2
fi
DDPC=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-"1 2"}
MODELS=${MODELS:-"gpt mlp cnn seq2seq"}
STEPS=${STEPS:-20}

[[ -x $DDPC ]] || { echo "$0: $DDPC is not an executable" >&2; exit 2; }
"$PY" -c "import torch" 2>/dev/null ||
    { echo "$0: $PY cannot import torch (install Debian's python3-torch)" >&2; exit 2; }

# PyTorch's own kernels: its best vector ISA here (avx512 only where the CPU has it).
if grep -qw avx512f /proc/cpuinfo; then CAP=avx512; else CAP=avx2; fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -std=c11 -O2 -fopenmp -I/usr/include/x86_64-linux-gnu/openblas-openmp \
    "$HERE/sgemm_peak.c" /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so \
    -o "$TMP/sgemm_peak"

. "$HERE/lib.sh"
read -ra pairs <<<"$(seq2seq_pairs "$TMP/pairs")" # seq2seq's data: overrides for its config

failed=0
echo "| threads | model | ddpc samples/s (tok/s for gpt) | PyTorch |"\
" ratio ddpc/PyTorch | ddpc GFLOP/s | sgemm peak GFLOP/s |"
echo "|---|---|---|---|---|---|---|"
for t in $THREADS; do
    peak_line=$(thread_env "$t" "$TMP/sgemm_peak" "$t")
    echo "$peak_line" >&2
    peak=$(json sgemm_peak_gflops <<<"$peak_line")
    for m in $MODELS; do
        cfg=("$HERE/configs/$m.yaml")
        [[ $m == seq2seq ]] && cfg+=("${pairs[@]}")
        key=samples_per_s
        [[ $m == gpt ]] && key=tokens_per_s
        if d_out=$(thread_env "$t" "$DDPC" bench step "${cfg[@]}" num_threads="$t" \
                   bench.steps="$STEPS"); then
            echo "$d_out" >&2
        else
            echo "$0: ddpc bench step failed for $m at $t threads" >&2
            d_out=""
            failed=1
        fi
        if p_out=$(thread_env "$t" env ATEN_CPU_CAPABILITY="$CAP" \
                   "$PY" "$HERE/torch_step.py" "$m" --threads "$t" --steps "$STEPS"); then
            echo "$p_out" >&2
        else
            echo "$0: torch_step.py failed for $m at $t threads" >&2
            p_out=""
            failed=1
        fi
        d=$(json "$key" <<<"$d_out")
        p=$(json "$key" <<<"$p_out")
        echo "| $t | $m | $d | $p | $(ratio "$d" "$p") | $(json gflops <<<"$d_out") | $peak |"
    done
done
exit "$failed"
