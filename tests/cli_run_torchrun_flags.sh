#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# torchrun's rendezvous flags on `ddpc run`, so that copied torchrun lines work: --standalone
# trains the weights of a plain `ddpc run` job; two "nodes" on 127.0.0.1 meeting through
# --rdzv-endpoint/--rdzv-backend c10d/--rdzv-id train them too; the flags map onto ddpc's own
# (endpoint = master address and port, 29400 when omitted; id = run id), underscore spellings
# included; what ddpc cannot honour is refused in one line (exit 2) naming the alternative.
# usage: cli_run_torchrun_flags.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE TORCHELASTIC_RUN_ID DDPC_LAUNCHER
unset OMPI_COMM_WORLD_SIZE PMI_SIZE DDPC_STORE_TOKEN DDPC_STORE_TOKEN_FILE
config="$src/configs/fmnist_mlp.yaml"
train=(data.type=synthetic_images data.size=640 max_steps=20 log_every=10 eval_every=0
       data.batch_size=8)
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# refused NAME WANT OPTIONS...: `ddpc run OPTIONS -- true` exits 2 with the one line WANT.
refused() {
    local name=$1 want=$2
    shift 2
    "$ddpc" run "$@" -- true >"$tmp/r.out" 2>"$tmp/r.err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(cat "$tmp/r.err")" = "ddpc run: $want" ] && ok "$name" ||
        fail "$name (exit $rc)" "$tmp/r.err"
}
refused "--standalone with --nnodes 2 is refused" "--standalone is a job on this host alone, \
meeting on a free local port, so it cannot take --nnodes above 1; across hosts drop --standalone \
and give --nnodes N --node-rank R --rdzv-endpoint HOST:PORT" --standalone --nnodes 2
refused "--standalone with --rdzv-endpoint is refused" "--standalone is a job on this host alone, \
meeting on a free local port, so it cannot take --rdzv-endpoint; across hosts drop --standalone \
and give --nnodes N --node-rank R --rdzv-endpoint HOST:PORT" --rdzv_endpoint=127.0.0.1:1234 \
    --standalone
for other in "--master-addr 127.0.0.1" "--master-port 29500" "--hostfile $tmp/hosts"; do
    refused "--standalone with ${other% *} is refused" "--standalone is a job on this host alone, \
meeting on a free local port, so it cannot take ${other% *}; across hosts drop --standalone and \
give --nnodes N --node-rank R --rdzv-endpoint HOST:PORT" --standalone $other
done
refused "--rdzv-backend etcd names ddpc's store" "--rdzv-backend etcd: ddpc has no etcd \
rendezvous; its own store at node 0 serves instead: give --rdzv-endpoint HOST:PORT (node 0's \
address) and drop --rdzv-backend" --rdzv-backend etcd
refused "--rdzv-backend etcd-v2 likewise" "--rdzv-backend etcd-v2: ddpc has no etcd rendezvous; \
its own store at node 0 serves instead: give --rdzv-endpoint HOST:PORT (node 0's address) and \
drop --rdzv-backend" --rdzv_backend etcd-v2
refused "an unknown --rdzv-backend" "--rdzv-backend: 'zk' is not 'c10d' or 'static'" \
    --rdzv-backend zk
refused "an elastic --nnodes range" "--nnodes 1:4: ddpc does not add or drop nodes while a job \
runs (torchrun's elastic MIN:MAX); give the fixed number, --nnodes 4" --nnodes 1:4
refused "a bad endpoint port" "--rdzv-endpoint: the port of 'h:65536' is not 0 to 65535" \
    --rdzv-endpoint h:65536
refused "a free endpoint port across hosts" "--rdzv-endpoint 127.0.0.1:0 picks a free port, which \
the other 1 nodes cannot know: give a fixed port, the same on every host" --nnodes 2 \
    --rdzv-endpoint 127.0.0.1:0
refused "--rdzv-id and --run-id that differ" "--run-id b and the id given before it, a \
(--run-id, --rdzv-id), name different jobs; give one" --rdzv-id a --run-id b
refused "--master-port that contradicts --rdzv-endpoint" "--master-port 6 and the \
--rdzv-endpoint 127.0.0.1:5 given before it name different rendezvous; give one of them" \
    --rdzv-endpoint 127.0.0.1:5 --master-port 6

# What the workers get: the endpoint as MASTER_ADDR/MASTER_PORT (torchrun's 29400 when the port is
# omitted; 0 is a free port), the id as TORCHELASTIC_RUN_ID.
show='echo "$RANK $MASTER_ADDR $MASTER_PORT $TORCHELASTIC_RUN_ID"'
"$ddpc" run --rdzv_endpoint=localhost --rdzv_backend=c10d --rdzv_id=job7 --nnodes 1:1 \
    -- sh -c "$show" >"$tmp/e.out" 2>"$tmp/e.err"
check "--rdzv-endpoint HOST is HOST:29400, --rdzv-id the run id" \
    test "$(cat "$tmp/e.out")" = "0 localhost 29400 job7"
"$ddpc" run --rdzv-endpoint 127.0.0.1:0 --rdzv-backend static -- sh -c "$show" \
    >"$tmp/z.out" 2>"$tmp/z.err"
check "--rdzv-endpoint HOST:0 is a free port" grep -qE '^0 127\.0\.0\.1 [1-9][0-9]* ddpc-' "$tmp/z.out"

# Real training: --standalone is ddpc run's default, so it trains the same bytes.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$config" "${train[@]}" run_dir="$tmp/ref" \
    weights_out="$tmp/ref.safetensors" >"$tmp/ref.log" 2>&1
check_status "the job under ddpc run --nproc-per-node 2" $? "$tmp/ref.log"
"$ddpc" run --standalone --nproc-per-node 2 -- "$ddpc" train "$config" "${train[@]}" \
    run_dir="$tmp/sa" weights_out="$tmp/sa.safetensors" >"$tmp/sa.log" 2>&1
check_status "ddpc run --standalone --nproc-per-node 2 trains" $? "$tmp/sa.log"
check "--standalone trains the same weights" cmp -s "$tmp/ref.safetensors" "$tmp/sa.safetensors"

# Two "nodes" on this machine, as a torchrun line for two hosts would start them.
port=$(free_port)
pids=()
for n in 0 1; do
    timeout 300 "$ddpc" run --nnodes 2 --node-rank $n --nproc-per-node 1 \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-backend c10d --rdzv-id job1 \
        -- "$ddpc" train "$config" "${train[@]}" run_dir="$tmp/nodes" \
        weights_out="$tmp/nodes.safetensors" >"$tmp/n$n.log" 2>&1 &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
check_status "two nodes meet at --rdzv-endpoint and train" $rc "$tmp/n0.log" "$tmp/n1.log"
check "on 2 ranks" grep -q "global batch 16 = 8 per rank x 2 ranks" "$tmp/n0.log"
check "two nodes train the same weights" cmp -s "$tmp/ref.safetensors" "$tmp/nodes.safetensors"

summary
