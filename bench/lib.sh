# SPDX-License-Identifier: MIT
# bench/lib.sh: helpers the benchmark scripts share; source it after setting PY (the Python with
# PyTorch, used to read JSON lines).

# thread_env N CMD...: run CMD with every thread pool set to N (PASSIVE waits when N >= 2, so
# OpenMP's spinning workers do not fight OpenBLAS's threads).
thread_env() {
    local n=$1
    shift
    local wait=(-u OMP_WAIT_POLICY)
    if [[ $n -ge 2 ]]; then wait=(OMP_WAIT_POLICY=PASSIVE); fi
    env "${wait[@]}" OMP_NUM_THREADS="$n" OPENBLAS_NUM_THREADS="$n" MKL_NUM_THREADS="$n" "$@"
}

# json FIELD: FIELD of the last JSON object line on stdin, or "n/a".
json() {
    "$PY" -c '
import json, sys
lines = [l for l in sys.stdin.read().splitlines() if l.lstrip().startswith("{")]
try:
    v = json.loads(lines[-1])[sys.argv[1]]
    print(f"{v:.1f}" if isinstance(v, float) else v)
except Exception:
    print("n/a")' "$1"
}

# ratio A B: A / B to two decimals, or "n/a".
ratio() {
    "$PY" -c '
import sys
try: print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")
except Exception: print("n/a")' "$1" "$2"
}
