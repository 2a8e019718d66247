#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ddpc bench <collective>` end to end: the nccl-tests table has its shape (one row per size,
# count = size / type size, busbw = algbw x the collective's factor) and --check finds 0 wrong
# elements, with 1 rank and with 2 ranks on the shm backend (started with torchrun's variables,
# as `ddpc run` starts workers); --json gives one object per size; a bad option is one stderr
# line and exit 2.
# usage: cli_bench_coll.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

# No launcher's variables from the caller's environment: a plain run is one process.
for v in $(env | grep -oE '^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_[A-Z_]*|OMPI_[A-Z_]*|PMI_[A-Z_]*|SLURM_[A-Z_]*|DDPC_[A-Z_]*)='); do
    unset "${v%=}"
done
export OMP_NUM_THREADS=1

free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 30000))
}

# table_ok FILE ROWS WORLD COLL TYPESIZE: the table printed by rank 0 is well formed.
table_ok() {
    local file=$1 rows=$2 world=$3 coll=$4 tsize=$5
    grep -q '^#  *size  *count  *type  *redop  *time  *algbw  *busbw  *#wrong$' "$file" || return 1
    awk -v rows="$rows" -v n="$world" -v coll="$coll" -v ts="$tsize" '
        /^#/ { next }
        {
            got++
            if (NF != 8 || $8 != "0" || $5 <= 0) bad = 1
            blocks = (coll == "all_gather" || coll == "reduce_scatter") ? n : 1
            want = 4096 * 2 ^ (got - 1)
            want = int(want / ts / blocks) * blocks * ts
            if ($1 != want || $2 != $1 / ts) bad = 1
            f = coll == "all_reduce" ? 2 * (n - 1) / n : coll == "broadcast" ? 1 : (n - 1) / n
            d = $7 - $6 * f
            if (d > 0.011 + 0.001 * $7 || d < -0.011 - 0.001 * $7) bad = 1
        }
        END { exit !(got == rows && !bad) }' "$file"
}

# one NAME ROWS COLL TYPESIZE ARGS...: one process.
one() {
    local name=$1 rows=$2 coll=$3 ts=$4
    shift 4
    if timeout 60 "$ddpc" bench "$@" >"$tmp/out" 2>"$tmp/err" && table_ok "$tmp/out" "$rows" 1 "$coll" "$ts"; then
        ok "$name"
    else
        fail "$name" "$tmp/out" "$tmp/err"
    fi
}

# launch N ARGS...: N ranks with torchrun's variables; rank r's output in $tmp/rank$r.{out,err}.
launch() {
    local n=$1 port pids=() rc=0
    shift
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n GROUP_RANK=0 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port DDPC_COLLECTIVE_TIMEOUT=30 timeout 60 "$ddpc" bench "$@" >"$tmp/rank$r.out" 2>"$tmp/rank$r.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}

# many NAME N ROWS COLL TYPESIZE ARGS...: N ranks; only rank 0 prints.
many() {
    local name=$1 n=$2 rows=$3 coll=$4 ts=$5
    shift 5
    if launch "$n" "$@" && table_ok "$tmp/rank0.out" "$rows" "$n" "$coll" "$ts" &&
        [ ! -s "$tmp/rank1.out" ]; then
        ok "$name"
    else
        fail "$name" "$tmp/rank0.out" "$tmp/rank0.err" "$tmp/rank1.out" "$tmp/rank1.err"
    fi
}

small=(--max-bytes 64K --iters 3 --warmup 1)
one "1 rank all_reduce f32 sum" 5 all_reduce 4 allreduce --check "${small[@]}"
one "1 rank all_reduce f64 max" 3 all_reduce 8 all_reduce --check --dtype f64 --op max --max-bytes 16K --iters 2
one "1 rank broadcast f16" 3 broadcast 2 broadcast --check --dtype f16 --max-bytes 16K --iters 2
one "1 rank all_gather i64" 3 all_gather 8 all_gather --check --dtype i64 --max-bytes 16K --iters 2
one "1 rank reduce_scatter bf16 avg" 3 reduce_scatter 2 reduce_scatter --check --dtype bf16 --op avg --max-bytes 16K --iters 2

if timeout 60 "$ddpc" bench allreduce --check --json "${small[@]}" >"$tmp/out" 2>"$tmp/err" &&
    [ "$(wc -l <"$tmp/out")" -eq 5 ] &&
    [ "$(grep -c '^{"bench": "all_reduce", "impl": "ddpc", .*"size": [0-9]*, .*"busbw": [0-9.]*, "wrong": 0}$' "$tmp/out")" -eq 5 ]; then
    ok "--json: one object per size"
else
    fail "--json: one object per size" "$tmp/out" "$tmp/err"
fi

many "2 ranks all_reduce f32 sum" 2 5 all_reduce 4 allreduce --check "${small[@]}"
many "2 ranks all_reduce bf16 avg" 2 3 all_reduce 2 allreduce --check --dtype bf16 --op avg --max-bytes 16K --iters 3
many "2 ranks broadcast from rank 1" 2 3 broadcast 4 broadcast --check --root 1 --max-bytes 16K --iters 3
many "2 ranks all_gather f32" 2 3 all_gather 4 all_gather --check --max-bytes 16K --iters 3
many "2 ranks reduce_scatter i32 min" 2 3 reduce_scatter 4 reduce_scatter --check --dtype i32 --op min --max-bytes 16K --iters 3

# As a worker of `ddpc run`: the launcher's variables, rank 0's table on the console.
if DDPC_COLLECTIVE_TIMEOUT=30 timeout 60 "$ddpc" run --nproc-per-node 2 -- "$ddpc" bench allreduce \
    --check --max-bytes 16K --iters 3 >"$tmp/out" 2>"$tmp/err" &&
    table_ok "$tmp/out" 3 2 all_reduce 4 && grep -q '^# ddpc bench all_reduce: 2 ranks, backend shm' "$tmp/out"; then
    ok "2 ranks under ddpc run"
else
    fail "2 ranks under ddpc run" "$tmp/out" "$tmp/err"
fi

# expect_usage NAME WANT ARGS...: exit 2 with exactly one stderr line containing WANT.
expect_usage() {
    local name=$1 want=$2
    shift 2
    timeout 60 "$ddpc" bench "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$want" "$tmp/err"; then
        ok "$name: $(cat "$tmp/err")"
    else
        fail "$name (exit $rc, wanted '$want')" "$tmp/err"
    fi
}
expect_usage "zero iterations" "--iters" allreduce --iters 0
expect_usage "unknown dtype" "--dtype" allreduce --dtype f8
expect_usage "malformed size" "--max-bytes" allreduce --max-bytes 1X
expect_usage "unknown option" "--bogus" allreduce --bogus 1
expect_usage "option without value" "--iters" allreduce --check --iters
expect_usage "min above max" "--min-bytes" allreduce --min-bytes 1M --max-bytes 4K
expect_usage "op on broadcast" "--op" broadcast --op max
expect_usage "unknown backend" "--backend" allreduce --backend ucc
expect_usage "root outside the group" "--root" broadcast --root 5 --max-bytes 4K
expect_usage "unknown collective" "usage: ddpc bench" alltoall

WORLD_SIZE=abc RANK=0 timeout 60 "$ddpc" bench allreduce --max-bytes 4K >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q WORLD_SIZE "$tmp/err"; then
    ok "malformed WORLD_SIZE: $(cat "$tmp/err")"
else
    fail "malformed WORLD_SIZE (exit $rc)" "$tmp/err"
fi

summary
