#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# precision_bench.sh DDPC_BIN: the GPT training step (bench/configs/gpt.yaml, the model of
# bench/torch_step.py gpt) at fp32 and bf16 in ddpc (`precision=`) and in PyTorch 1.13 (fp32, and
# torch.autocast("cpu", dtype=torch.bfloat16)), at 1 and 2 threads, all in one run. Prints the
# CPU, its bf16 instructions and what oneDNN and ddpc chose, then a Markdown table on stdout; the
# raw JSON lines go to stderr. Every peer gets the environment /work/shared/PEERS.md asks for.
# Environment: THREADS (default "1 2"), STEPS (default 10), WARMUP (default 3), PYTHON
# (default /usr/bin/python3, which has Debian's python3-torch).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DDPC_BIN" >&2
    exit 2
fi
DDPC=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-"1 2"}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-3}

[[ -x $DDPC ]] || { echo "$0: $DDPC is not an executable" >&2; exit 2; }
"$PY" -c "import torch" 2>/dev/null ||
    { echo "$0: $PY cannot import torch (install Debian's python3-torch)" >&2; exit 2; }

if grep -qw avx512f /proc/cpuinfo; then CAP=avx512; else CAP=avx2; fi
bf16_flags=$(grep -m1 -ow -E 'avx512_bf16|amx_bf16|amx_tile|avx512f' /proc/cpuinfo | sort -u |
             tr '\n' ' ' || true)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cores;" \
     "bf16 instructions: ${bf16_flags:-none (no avx512_bf16, no amx)}"

. "$HERE/lib.sh"

failed=0
ddpc_step() { # THREADS PRECISION: ddpc's JSON line
    thread_env "$1" "$DDPC" bench step "$HERE/configs/gpt.yaml" num_threads="$1" precision="$2" \
        bench.steps="$STEPS" bench.warmup="$WARMUP" ||
        { echo "$0: ddpc bench step failed at $1 threads, $2" >&2; failed=1; }
}
torch_step() { # THREADS AMP: PyTorch's JSON line
    thread_env "$1" env ATEN_CPU_CAPABILITY="$CAP" "$PY" "$HERE/torch_step.py" gpt --threads "$1" \
        --steps "$STEPS" --warmup "$WARMUP" --amp "$2" ||
        { echo "$0: torch_step.py failed at $1 threads, amp $2" >&2; failed=1; }
}

rows=()
for t in $THREADS; do
    d32=$(ddpc_step "$t" fp32) && echo "$d32" >&2
    d16=$(ddpc_step "$t" bf16) && echo "$d16" >&2
    p32=$(torch_step "$t" none) && echo "$p32" >&2
    p16=$(torch_step "$t" bf16) && echo "$p16" >&2
    [[ -n ${engine:-} ]] || engine="ddpc bf16 products: $(json matmul <<<"$d16"); $(json onednn <<<"$d16")"
    a=$(json median_step_ms <<<"$d32") b=$(json median_step_ms <<<"$d16")
    c=$(json median_step_ms <<<"$p32") d=$(json median_step_ms <<<"$p16")
    rows+=("| $t | $a | $b | $(ratio "$a" "$b") | $c | $d | $(ratio "$d" "$b") | $(ratio "$c" "$a") |")
done
echo "$engine"
echo
echo "| threads | ddpc fp32 ms | ddpc bf16 ms | ddpc bf16 speed-up | PyTorch fp32 ms |"\
" PyTorch autocast bf16 ms | ddpc bf16 vs PyTorch bf16 | ddpc fp32 vs PyTorch fp32 |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit "$failed"
