#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The job's token across hosts with nothing given (docs/launcher.md, "The store's token"): on the
# test bed (testbed.sh; host i is 10.77.0.(i+1), the file system shared), node 1 starts first with
# DDPC_STORE_TOKEN_FILE naming node 0's not-yet-written token file and waits for it; node 0, given
# no token, generates one, writes it there (mode 0600, never printed) and says where. The job
# trains to the weights of a loopback run, and the file is gone when the job ends. Needs root (CI
# is root); otherwise it says so and exits 77, which ctest reports as skipped, never as passed.
# usage: run_token.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
here=$(dirname "${BASH_SOURCE[0]}")
if [ "$(id -u)" -ne 0 ]; then
    echo "run_token.sh: the multi-host test bed needs root (network namespaces); not run" >&2
    exit 77
fi
. "$here/../lib/check.sh"
. "$here/testbed.sh"
trap 'bed_down; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
common=(data.type=synthetic_images data.size=480 data.batch_size=8 epochs=1 log_every=20
        data.eval_batch_size=40)
cfg=$src/configs/fmnist_mlp.yaml
bed_up 2 || exit 1
unset DDPC_STORE_TOKEN DDPC_STORE_TOKEN_FILE DDPC_STORE_BIND # bed_up exports a token: not here
port=$(bed_port) # each namespace has its own ports

# The reference: two launchers on host 0's loopback (no token needed there).
for i in 0 1; do
    bed_exec 0 timeout 240 "$ddpc" run --nnodes 2 --node-rank "$i" --master-addr 127.0.0.1 \
        --master-port "$port" -- "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/loop" \
        weights_out="$tmp/loop.st" >"$tmp/loop.$i.log" 2>&1 &
    pids[$i]=$!
done
wait "${pids[0]}" && wait "${pids[1]}"
check_status "loopback reference: both launchers exit 0" $? "$tmp/loop.0.log" "$tmp/loop.1.log"

# Node 1 first, told only where node 0's file will be. Its worker, which runs while node 0's
# launcher is in the job, records the file's mode and whether the token it got is the file's.
file=$tmp/logs0/store.token
probe="stat -c %a '$file' >'$tmp/mode'; head -n1 '$file' >'$tmp/seen'
    [ \"\$DDPC_STORE_TOKEN\" = \"\$(cat '$tmp/seen')\" ] && echo same >'$tmp/same'
    exec \"\$0\" \"\$@\""
DDPC_STORE_TOKEN_FILE=$file bed_exec 1 timeout 240 "$ddpc" run --nnodes 2 --node-rank 1 \
    --master-addr "$(bed_addr 0)" --master-port "$port" -- sh -c "$probe" "$ddpc" train \
    "$cfg" "${common[@]}" run_dir="$tmp/tok" weights_out="$tmp/tok.st" >"$tmp/tok.1.log" 2>&1 &
pid1=$!
for _ in $(seq 1200); do grep -q "waiting up to" "$tmp/tok.1.log" && break; sleep 0.1; done
check "node 1 waits for node 0's token file" grep -q "^ddpc run: waiting up to 60 s \
(--rdzv-timeout) for DDPC_STORE_TOKEN_FILE=$file, which node 0's launcher writes" "$tmp/tok.1.log"
bed_exec 0 timeout 240 "$ddpc" run --nnodes 2 --node-rank 0 --master-addr "$(bed_addr 0)" \
    --master-port "$port" --log-dir "$tmp/logs0" --tee -- "$ddpc" train "$cfg" "${common[@]}" \
    run_dir="$tmp/tok" weights_out="$tmp/tok.st" >"$tmp/tok.0.log" 2>&1
rc0=$?
wait $pid1
rc1=$?
check "no token given: both launchers exit 0 ($rc0/$rc1)" test $rc0 -eq 0 -a $rc1 -eq 0 ||
    cat "$tmp/tok.0.log" "$tmp/tok.1.log"
check "node 0 says where its token is and how to pass it" grep -q "^ddpc run: the job's store \
token is in $file (mode 0600, removed when the job ends); start the other nodes with \
DDPC_STORE_TOKEN_FILE=$file on a shared file system, or with DDPC_STORE_TOKEN set" "$tmp/tok.0.log"
check "the token file was mode 0600 during the job" test "$(cat "$tmp/mode" 2>/dev/null)" = 600
check "node 1's workers got the token of node 0's file" test -s "$tmp/same"
check "the job trains to the loopback run's weights" cmp "$tmp/loop.st" "$tmp/tok.st"
check "node 0 removed its token file when the job ended" test -s "$tmp/mode" -a ! -e "$file"
# The token appears in no output: only in the file and the workers' environments.
check "the workers saw a token" test -s "$tmp/seen"
check "no launcher printed the token" bash -c "test -s '$tmp/seen' && ! grep -rqF -f '$tmp/seen' \
    '$tmp/tok.0.log' '$tmp/tok.1.log' '$tmp/logs0/attempt_0'"
summary
