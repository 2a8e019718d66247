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

# awk_rnd: an awk function rnd() (Park and Miller's minimal standard, exact in doubles; seed it
# by setting s) for data files that must be the same bytes every run: awk's srand/rand differ from
# one awk to the next, and Ubuntu 24.04's mawk 1.3.4 20240123 draws other numbers on each run
# whatever the seed (srand(7) then rand() gave 0.618874, then 0.256267).
awk_rnd='function rnd() { s = (s * 16807) % 2147483647; return s / 2147483647 }'

# seq2seq_pairs DIR: the translation pairs bench/configs/seq2seq.yaml trains on (and
# bench/torch_step.py seq2seq mirrors): DIR/pairs.src, 4096 words of 15 random letters, and
# DIR/pairs.tgt, each reversed: 30 ids with the 4 specials, every batch 16 wide on both sides.
# Prints the overrides that point every split of the config at them.
seq2seq_pairs() {
    mkdir -p "$1"
    awk "$awk_rnd"' BEGIN { s = 5; a = "abcdefghijklmnopqrstuvwxyz"
        for (i = 0; i < 4096; i++) {
            w = ""; for (j = 0; j < 15; j++) w = w substr(a, 1 + int(26 * rnd()), 1)
            r = ""; for (j = 15; j > 0; j--) r = r substr(w, j, 1)
            print w > "/dev/stdout"; print r > "/dev/stderr" } }' >"$1/pairs.src" 2>"$1/pairs.tgt"
    local split
    for split in train valid test; do
        printf 'data.%s_src=%s data.%s_tgt=%s ' "$split" "$1/pairs.src" "$split" "$1/pairs.tgt"
    done
}
