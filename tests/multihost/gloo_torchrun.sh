#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# torchrun on every host, as the seeds deploy it (`--nnodes 2 --node_rank R --master_addr A`,
# static rendezvous: torchrun's agent serves torch's own store at MASTER_PORT and says so with
# TORCHELASTIC_USE_AGENT_STORE=True): 2 hosts x 2 workers of `ddpc bench allreduce --check` pick
# the gloo backend by themselves (ddpc's store then runs beside torch's, on the next port) and
# get every element right.
#   gloo_torchrun.sh DDPC_BIN
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DDPC=${1:?usage: gloo_torchrun.sh DDPC_BIN}
PY=${PYTHON:-/usr/bin/python3}
. "$HERE/testbed.sh"
. "$HERE/ranks.sh"
mh_require_root gloo_torchrun
"$PY" -c "import torch.distributed.run" 2>/dev/null ||
    { echo "gloo_torchrun: FAILED: $PY has no torch (scripts/setup installs python3-torch)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; bed_down; rm -rf "$OUT"' EXIT
bed_up 2 || exit 1
port=$(bed_port)
pids=()
for h in 0 1; do
    # torchrun 1.13 under Python 3.11 needs --redirects/--tee (../shared/PEERS.md)
    bed_exec "$h" env OMP_NUM_THREADS=1 "$PY" -m torch.distributed.run --nnodes 2 --node_rank "$h" \
        --nproc_per_node 2 --master_addr "$(bed_addr 0)" --master_port "$port" --no_python \
        --redirects 1:2 --tee 1:2 "$DDPC" bench allreduce --check --json --min-bytes 4K \
        --max-bytes 4M --step-factor 16 --iters 3 --warmup 1 --min-ms 0 --max-ms 0 \
        >"$OUT/host.$h" 2>&1 &
    pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
lines=$(grep -o '{"bench".*}' "$OUT/host.0")
if [ $fail -ne 0 ] || [ "$(echo "$lines" | grep -c '"backend": "gloo", "ranks": 4')" -ne 3 ] ||
    echo "$lines" | grep -vq '"wrong": 0}'; then
    echo "gloo_torchrun: FAILED" >&2
    tail -n 20 "$OUT"/host.* >&2
    exit 1
fi
echo "$lines"
echo "torchrun on 2 hosts x 2: backend gloo, every element right"
