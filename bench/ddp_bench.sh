#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ddp_bench.sh DDPC_BIN: data-parallel training throughput of ddpc (`ddpc run` + `ddpc bench step`,
# shm backend) vs PyTorch 1.13 DDP (torchrun + bench/torch_ddp.py, gloo) on the same models, at 1
# and 2 ranks of 1 thread each, all in one run. Prints a Markdown table on stdout (bench/README.md,
# "Data-parallel training", explains the columns); the raw JSON lines go to stderr, each with
# other_cpu, the share of the machine other processes used meanwhile (ddp_measure.py); the table
# leaves out runs above 10% (DISTURBED=0.10) when a cleaner one of the same cell exists.
# Environment: MODELS (default "gpt cnn"; also mlp), STEPS (20), WARMUP (3), REPEAT (3: each
# measurement is taken REPEAT times, interleaved, and the median kept), PYTHON (/usr/bin/python3),
# PRECISION (fp32; bf16 runs ddpc with precision=bf16 and PyTorch under CPU autocast bf16).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DDPC_BIN" >&2
    exit 2
fi
DDPC=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
MODELS=${MODELS:-"gpt cnn"}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
REPEAT=${REPEAT:-3}
PRECISION=${PRECISION:-fp32}
case $PRECISION in
    fp32) AMP=none ;;
    bf16) AMP=bf16 ;;
    *) echo "$0: PRECISION must be fp32 or bf16, got '$PRECISION'" >&2; exit 2 ;;
esac

[[ -x $DDPC ]] || { echo "$0: $DDPC is not an executable" >&2; exit 2; }
if ! "$PY" -c "import torch, torch.distributed.run" 2>/dev/null; then
    echo "$0: $PY cannot import torch and torch.distributed.run: PyTorch is missing, so there is" \
         "no peer to compare with (install Debian's python3-torch, or set PYTHON)" >&2
    exit 2
fi
if ! "$PY" -c "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()" \
     2>/dev/null; then
    echo "$0: this PyTorch ($PY) has no torch.distributed with gloo" >&2
    exit 2
fi

# PyTorch's own kernels: its best vector ISA here (avx512 only where the CPU has it).
if grep -qw avx512f /proc/cpuinfo; then CAP=avx512; else CAP=avx2; fi
# One thread per rank for every pool (ours, OpenMP, OpenBLAS, MKL); gloo on loopback.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo
unset OMP_WAIT_POLICY

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Times both sides' sgemm calls (ddpc: cblas_sgemm, PyTorch: sgemm_) in the same runs.
CC=${CC:-cc}
"$CC" -O2 -shared -fPIC "$HERE/gemm_timer.c" -o "$TMP/gemm_timer.so" -ldl ||
    { echo "$0: cannot build $HERE/gemm_timer.c with $CC" >&2; exit 2; }
MEASURE=("$PY" "$HERE/ddp_measure.py")
TIMER=(--gemm-timer "$TMP/gemm_timer.so" --steps $((STEPS + WARMUP)))

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run_ddpc MODEL RANKS OUTFILE: appends ddpc's JSON line (rank 0's) to OUTFILE.
run_ddpc() {
    local cmd=("$DDPC" bench step "$HERE/configs/$1.yaml" num_threads=1 bench.steps="$STEPS"
               bench.warmup="$WARMUP" precision="$PRECISION")
    if [[ $2 -gt 1 ]]; then cmd=("$DDPC" run --nproc-per-node "$2" -- "${cmd[@]}"); fi
    "${MEASURE[@]}" "$3" "${TIMER[@]}" -- "${cmd[@]}" ||
        { echo "$0: ddpc failed for $1 at $2 ranks: ${cmd[*]}" >&2; return 1; }
}

# run_torch MODEL RANKS OUTFILE: appends torch_ddp.py's JSON line (rank 0's) to OUTFILE.
# torchrun 1.13 under Python 3.11 needs --redirects/--tee (PEERS.md).
run_torch() {
    local cmd=("$PY" -m torch.distributed.run --nproc_per_node "$2" --master_addr 127.0.0.1
               --master_port "$(free_port)" --redirects 1:2 --tee 1:2
               "$HERE/torch_ddp.py" "$1" --threads 1 --steps "$STEPS" --warmup "$WARMUP" --amp "$AMP")
    ATEN_CPU_CAPABILITY="$CAP" timeout 600 "${MEASURE[@]}" "$3" "${TIMER[@]}" -- "${cmd[@]}" ||
        { echo "$0: PyTorch DDP failed for $1 at $2 ranks: ${cmd[*]}" >&2; return 1; }
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" >&2
failed=0
for ((i = 1; i <= REPEAT; i++)); do
    for m in $MODELS; do
        for n in 1 2; do
            run_ddpc "$m" "$n" "$TMP/ddpc_${m}_$n.jsonl" || failed=1
            run_torch "$m" "$n" "$TMP/torch_${m}_$n.jsonl" || failed=1
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" >&2
DISTURBED=${DISTURBED:-0.10} "$PY" "$HERE/ddp_table.py" "$TMP" $MODELS || failed=1
exit "$failed"
