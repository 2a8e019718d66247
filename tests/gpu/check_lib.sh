# SPDX-License-Identifier: MIT
# Sourced by the GPU session's check scripts (train_checks.sh, multi_*.sh) after `set -u`, with
# their arguments DDPC_BIN SOURCE_DIR: sets ddpc, src, work (WORK, else a new scratch folder), py
# (DDPC_GPU_PYTHON, else python3), dev (DDPC_CHECK_DEVICE, else cuda: the CPU dry runs set cpu),
# env_out (`ddpc env`'s output), and pass/fail (one verdict line each; fails counts the FAILs).
# On cuda without a GPU that ddpc sees, says so and exits 77 (SKIPPED).
ddpc=$1
src=$2
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
py=${DDPC_GPU_PYTHON:-python3}
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
dev=${DDPC_CHECK_DEVICE:-cuda}
env_out=$("$ddpc" env 2>&1) # whole, then grep: grep -q's early exit would SIGPIPE ddpc
if [ "$dev" = cuda ] && ! grep -q "Device (auto): *cuda" <<<"$env_out"; then
    echo "skipped: ddpc env sees no GPU"
    grep -A8 "^GPU" <<<"$env_out"
    exit 77
fi

# losses_close A B TOL [FROM] [--common]: every training loss run A logged (metrics.jsonl under
# $work/A) against run B's at the same steps, from step FROM on, relative difference <= TOL (0:
# identical); both must have logged the same steps unless --common (the steps both logged).
losses_close() {
    "$py" "$src/tests/gpu/losses_close.py" "$work/$1/metrics.jsonl" "$work/$2/metrics.jsonl" \
        "$3" "${4:-0}" ${5:+"$5"}
}
