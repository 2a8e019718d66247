#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Platform-injected training across hosts: 2 hosts x 2 ranks, each process started directly with
# only RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (no launcher, no backend named),
# train the MLP a few steps; the final weights are byte-identical to `ddpc run --nproc-per-node 4`
# (shm, one host), and a rerun across hosts with LOCAL_WORLD_SIZE set too (the layout known up
# front) is byte-identical again. On one host, `ddpc run --backend gloo` and `dist.backend=gloo`
# (the degenerate case: one host, shm underneath) write the same bytes too.
#   gloo_train.sh DDPC_BIN SOURCE_DIR
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DDPC=${1:?usage: gloo_train.sh DDPC_BIN SOURCE_DIR}
SRC=${2:?usage: gloo_train.sh DDPC_BIN SOURCE_DIR}
. "$HERE/testbed.sh"
. "$HERE/ranks.sh"
mh_require_root gloo_train
OUT=$(mktemp -d)
trap 'kill -9 "${mh_pids[@]}" 2>/dev/null; bed_down; rm -rf "$OUT"' EXIT
export OMP_NUM_THREADS=1
common=(data.type=synthetic_images data.size=640 data.batch_size=8 epochs=1 log_every=5
        optim.momentum=0.9 data.eval_batch_size=50)
fail=0

"$DDPC" run --nproc-per-node 4 -- "$DDPC" train "$SRC/configs/fmnist_mlp.yaml" "${common[@]}" \
    run_dir="$OUT/ref" weights_out="$OUT/ref.safetensors" >"$OUT/ref.log" 2>&1 ||
    { echo "the one-host reference failed:" >&2; tail "$OUT/ref.log" >&2; exit 1; }

"$DDPC" run --nproc-per-node 4 --backend gloo -- "$DDPC" train "$SRC/configs/fmnist_mlp.yaml" \
    "${common[@]}" run_dir="$OUT/flag" weights_out="$OUT/flag.safetensors" >"$OUT/flag.log" 2>&1
"$DDPC" run --nproc-per-node 4 -- "$DDPC" train "$SRC/configs/fmnist_mlp.yaml" "${common[@]}" \
    dist.backend=gloo run_dir="$OUT/key" weights_out="$OUT/key.safetensors" >"$OUT/key.log" 2>&1
for how in flag key; do
    if grep -q "backend gloo" "$OUT/$how.log" && cmp -s "$OUT/ref.safetensors" "$OUT/$how.safetensors"
    then echo "one host, backend gloo by $how: same weights"; else
        echo "one host, backend gloo by $how: failed or different weights:" >&2
        tail -n 5 "$OUT/$how.log" >&2
        fail=1
    fi
done

bed_up 2 || exit 1
for run in a b; do
    mkdir -p "$OUT/$run"
    unset_local=(-u LOCAL_WORLD_SIZE) # run a: the five variables only
    [ $run = b ] && unset_local=()
    mh_start 2 2 "$OUT/$run" env "${unset_local[@]}" "$DDPC" train \
        "$SRC/configs/fmnist_mlp.yaml" "${common[@]}" run_dir="$OUT/$run/run" \
        weights_out="$OUT/$run.safetensors"
    if ! mh_wait; then
        echo "run $run across hosts failed:" >&2
        tail -n 5 "$OUT/$run"/rank.* >&2
        fail=1
    fi
done
for run in a b; do
    if grep -q "backend gloo" "$OUT/$run/rank.0"; then echo "run $run: auto chose gloo"; else
        echo "run $run did not use backend gloo:" >&2; head "$OUT/$run/rank.0" >&2; fail=1
    fi
done
if cmp "$OUT/ref.safetensors" "$OUT/a.safetensors"; then
    echo "2 hosts x 2 ranks = 1 host x 4 ranks, byte for byte"
else
    echo "weights across hosts differ from one host's" >&2; fail=1
fi
if cmp "$OUT/a.safetensors" "$OUT/b.safetensors"; then echo "the rerun is byte-identical"; else
    echo "a rerun across hosts wrote different weights" >&2; fail=1
fi
[ "$(mh_leftovers)" -eq 0 ] || { echo "segments left in /dev/shm" >&2; fail=1; }
exit $fail
