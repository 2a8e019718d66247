#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A collective mismatch reached through `ddpc train`: two ranks whose configs are identical but
# whose copies of the data differ (a host with a stale copy; here each rank runs in its own
# directory holding a Fashion-MNIST cut to 1024 or 768 training images) run out of batches at
# different steps, so one rank evaluates while the other still all-reduces gradients. Under
# mpirun (mpi backend) and under `ddpc run` (shm) the job must stop at once with the same
# "collective mismatch" sentence and a non-zero exit, where Open MPI used to abort the job with
# MPI_ERR_TRUNCATE (exit 15).
# usage: cli_train_mpi_diag.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
data=/usr/share/datasets/fashion-mnist # Debian dataset-fashion-mnist (scripts/setup)

# cut DIR N: Fashion-MNIST in DIR/fmnist with the first N training and 500 test images.
cut() {
    python3 - "$data" "$1/fmnist" "$2" <<'PY'
import gzip, os, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
for split, count in (("train", n), ("t10k", 500)):
    for kind, item, head_len in (("images-idx3", 784, 16), ("labels-idx1", 1, 8)):
        name = f"{split}-{kind}-ubyte.gz"
        with gzip.open(os.path.join(src, name), "rb") as f:
            head, body = f.read(head_len), f.read(count * item)
        with gzip.open(os.path.join(dst, name), "wb", compresslevel=1) as f:
            f.write(head[:4] + struct.pack(">I", count) + head[8:] + body)
PY
}
cut "$tmp/r0" 1024 && cut "$tmp/r1" 768
check "per-rank datasets written" test -s "$tmp/r1/fmnist/train-images-idx3-ubyte.gz"

# The command each rank runs, in its own directory; $1 is the variable holding its rank.
worker() {
    echo "cd $tmp/r\$$1 && exec $ddpc train $src/configs/fmnist_mlp.yaml data.path=fmnist" \
        "epochs=2 data.batch_size=64 run_dir=$tmp/run"
}
# 512 and 384 samples per rank: rank 1 evaluates after step 6 while rank 0 runs step 7. The
# patterns are extended regular expressions; \1 makes both sides name the same collective #.
head="ddpc train: collective mismatch: rank"
same="\\(every rank must issue the same collectives in the same order\\)"
grad="of 235146 f32 \\(avg\\)"
eval="of 6 f64 \\(sum\\)"
want0="$head 0 issued all_reduce #([0-9]+) $grad but rank 1 issued all_reduce #\\1 $eval $same"
want1="$head 1 issued all_reduce #([0-9]+) $eval but rank 0 issued all_reduce #\\1 $grad $same"

# expect NAME LOG RC SECONDS: a failure status in time, no MPI error, and the sentence of the
# first rank to fail (both launchers stop the other rank at once, maybe before it printed its own;
# that every rank reports is checked by test_comm_mpi_diag).
expect() {
    if [ "$3" -ne 0 ] && [ "$4" -lt 60 ] && { grep -qE "$want0" "$2" || grep -qE "$want1" "$2"; } &&
        ! grep -q "MPI_ERR\|NBC" "$2"; then
        ok "$1"
    else
        fail "$1 (exit $3 after $4 s)" "$2"
    fi
}

if command -v mpirun >/dev/null 2>&1 && "$ddpc" env | grep -q "Backends:.*mpi yes"; then
    start=$SECONDS
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe \
        --mca btl self,vader -np 2 sh -c "$(worker OMPI_COMM_WORLD_RANK)" >"$tmp/mpi.log" 2>&1
    expect "mpi: the job stops naming the mismatch" "$tmp/mpi.log" $? $((SECONDS - start))
else
    echo "note: mpirun or the mpi backend is missing, the mpi case was not run"
fi

rm -rf "$tmp/run"
start=$SECONDS
timeout 120 "$ddpc" run --nproc-per-node 2 -- sh -c "$(worker RANK)" >"$tmp/shm.log" 2>&1
expect "shm: the job stops naming the same mismatch" "$tmp/shm.log" $? $((SECONDS - start))

summary
