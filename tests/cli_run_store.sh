#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The job's store under `ddpc run` (docs/launcher.md, "The store's token"): two launchers as two
# nodes on 127.0.0.1 train while a stranger (tests/lib/store_abuser.py) forges a key without the
# token, replays nothing it could use, hangs 20 half-greetings and 300 idle connections and
# pushes 16 MiB writes: the job ends byte-identical to an undisturbed run, nothing forged lands,
# and the store listens on --master-addr only. Across hosts without a token node 0 writes its
# token file (and removes it); node 1 without one is refused naming that file, and one told of a
# file that never appears gives up after --rdzv-timeout. Refused: another token on node 1, a link
# or another user's file where node 0's token file goes, a --master-addr that is not this host's,
# a token file others can read; gloo workers of a platform without a token across hosts. Each
# refusal exits non-zero with one line.
# usage: cli_run_store.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
abuser=$(dirname "${BASH_SOURCE[0]}")/lib/store_abuser.py
export OMP_NUM_THREADS=1
unset DDPC_STORE_TOKEN DDPC_STORE_TOKEN_FILE DDPC_STORE_BIND
cfg=$src/configs/fmnist_mlp.yaml
common=(data.type=synthetic_images data.size=960 data.batch_size=8 epochs=1 log_every=20
        data.eval_batch_size=40)
master_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
token=cli-run-store-0123456789abcdef

# node NAME PORT RANK: one launcher (1 rank) of a 2-node job, in the background (pid in pids[RANK]).
node() {
    DDPC_STORE_TOKEN=$token timeout 240 "$ddpc" run --nnodes 2 --node-rank "$3" \
        --master-addr 127.0.0.1 --master-port "$2" -- "$ddpc" train "$cfg" "${common[@]}" \
        run_dir="$tmp/$1" weights_out="$tmp/$1.st" >"$tmp/$1.$3.log" 2>&1 &
    pids[$3]=$!
}
# nodes NAME PORT [WAIT_FOR]: both launchers train; node 1 starts once the file WAIT_FOR exists
# (at most 120 s); waits for both, exit codes in rc0 and rc1.
nodes() {
    node "$1" "$2" 0
    if [ -n "${3:-}" ]; then
        for _ in $(seq 2400); do [ -e "$3" ] && break; sleep 0.05; done
    fi
    node "$1" "$2" 1
    wait "${pids[0]}"
    rc0=$?
    wait "${pids[1]}"
    rc1=$?
}

port=$(master_port)
nodes quiet "$port"
check "undisturbed: both launchers exit 0 ($rc0/$rc1)" test $rc0 -eq 0 -a $rc1 -eq 0 ||
    cat "$tmp/quiet.0.log" "$tmp/quiet.1.log"

# The same job with a stranger at the store: it floods and forges while node 0 waits for node 1,
# and keeps forging while the job trains.
port=$(master_port)
python3 "$abuser" "$port" "$tmp/abuse.res" "$tmp/abuse.stop" >"$tmp/abuse.log" 2>&1 &
abuser_pid=$!
nodes abused "$port" "$tmp/abuse.res.ready"
touch "$tmp/abuse.stop"
wait $abuser_pid
arc=$?
check "abused: both launchers exit 0 ($rc0/$rc1)" test $rc0 -eq 0 -a $rc1 -eq 0 ||
    cat "$tmp/abused.0.log" "$tmp/abused.1.log"
check "abused: weights byte-identical to the undisturbed run" cmp "$tmp/quiet.st" "$tmp/abused.st"
check "the stranger ran its whole script (exit $arc)" test $arc -eq 0 || cat "$tmp/abuse.log"
for want in "bind=refused" "forged_raw=closed" "forged_v1=closed" "forged_mac=closed" \
    "big_writes=closed" "loris=20" "idle=300"; do
    check "stranger: $want" grep -qx "$want" "$tmp/abuse.res" || cat "$tmp/abuse.res"
done
check "nothing forged reached the launchers" \
    bash -c "! grep -q 'forged' '$tmp/abused.0.log' '$tmp/abused.1.log'"

# Node 1 with another token: refused at once naming node 0's store; node 0 names node 1 missing.
port=$(master_port)
DDPC_STORE_TOKEN=$token "$ddpc" run --nnodes 2 --master-addr 127.0.0.1 --master-port "$port" \
    --rdzv-timeout 5 -- true >"$tmp/w0.out" 2>"$tmp/w0.err" &
l0=$!
DDPC_STORE_TOKEN=another-token-0123456789 "$ddpc" run --nnodes 2 --node-rank 1 \
    --master-addr 127.0.0.1 --master-port "$port" --rdzv-timeout 60 -- true \
    >"$tmp/w1.out" 2>"$tmp/w1.err"
rc1=$?
wait $l0
rc0=$?
[ $rc1 -eq 2 ] && [ "$(wc -l <"$tmp/w1.err")" -eq 1 ] && grep -q "^ddpc run: node 1 cannot reach \
node 0's rendezvous at 127.0.0.1:$port within 60 s (--rdzv-timeout): the store at \
127.0.0.1:$port did not prove this job's token" "$tmp/w1.err" &&
    ok "another token on node 1: one line, exit 2" || fail "another token (exit $rc1)" "$tmp/w1.err"
[ $rc0 -eq 1 ] && grep -q "node 1 did not join within 5 s" "$tmp/w0.err" &&
    ok "node 0 then names node 1 missing" ||
    fail "node 0 after a wrong token (exit $rc0)" "$tmp/w0.err"

# Across hosts without a token, a node other than 0: refused before anything starts, naming the
# file node 0's launcher writes.
"$ddpc" run --nnodes 2 --node-rank 1 --master-addr 192.0.2.1 --master-port 29999 \
    --log-dir "$tmp/nt" -- true >"$tmp/nt.out" 2>"$tmp/nt.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/nt.err")" -eq 1 ] && grep -q "^ddpc run: --nnodes 2 needs the \
job's secret on every host.* set DDPC_STORE_TOKEN_FILE to the file node 0's launcher wrote \
(store.token in its --log-dir, else ddpc-store-token-29999 in its working directory; it says \
where)" "$tmp/nt.err" &&
    ok "no token on node 1 across hosts: one line naming node 0's file, exit 2" ||
    fail "no token on node 1 across hosts (exit $rc)" "$tmp/nt.err"

# Node 1 told of a token file that never appears: it waits --rdzv-timeout, then names it.
DDPC_STORE_TOKEN_FILE=$tmp/nt/never.token "$ddpc" run --nnodes 2 --node-rank 1 \
    --master-addr 192.0.2.1 --master-port 29999 --rdzv-timeout 1 -- true \
    >"$tmp/nw.out" 2>"$tmp/nw.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/nw.err")" -eq 2 ] && grep -q "^ddpc run: waiting up to 1 s \
(--rdzv-timeout) for DDPC_STORE_TOKEN_FILE=$tmp/nt/never.token" "$tmp/nw.err" &&
    tail -n1 "$tmp/nw.err" | grep -q "^ddpc run: DDPC_STORE_TOKEN_FILE=$tmp/nt/never.token did \
not appear within 1 s (--rdzv-timeout)" && ok "a token file that never appears: named, exit 1" ||
    fail "a token file that never appears (exit $rc)" "$tmp/nw.err"

# Node 0 without a token across hosts makes one and writes it to its token file (0600; in
# tests/multihost/run_token.sh the other node joins with it); here it cannot listen on the
# address, and the file goes with the job all the same.
mkdir -p "$tmp/n0"
(cd "$tmp/n0" && "$ddpc" run --nnodes 2 --master-addr 192.0.2.1 --master-port 29999 -- true \
    >"$tmp/n0.out" 2>"$tmp/n0.err")
rc=$?
[ $rc -eq 1 ] && grep -q "^ddpc run: the job's store token is in $tmp/n0/ddpc-store-token-29999 \
(mode 0600, removed when the job ends)" "$tmp/n0.err" &&
    grep -q "^ddpc run: node 0 cannot serve the rendezvous at 192.0.2.1:29999" "$tmp/n0.err" &&
    ok "node 0 without a token writes its token file and says where" ||
    fail "node 0 without a token (exit $rc)" "$tmp/n0.err"
check "node 0 removed its token file when the job ended" test ! -e "$tmp/n0/ddpc-store-token-29999"
# ... into --log-dir, never through a link or over another user's file: refused, nothing changed.
mkdir -p "$tmp/n1"
echo precious >"$tmp/precious"
ln -s "$tmp/precious" "$tmp/n1/store.token"
"$ddpc" run --nnodes 2 --master-addr 192.0.2.1 --master-port 29999 --log-dir "$tmp/n1" \
    -- true >"$tmp/n1.out" 2>"$tmp/n1.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/n1.err")" -eq 1 ] && grep -q "^ddpc run: cannot write the \
job's token file $tmp/n1/store.token: something that is not a regular file (a symbolic link) is \
there" "$tmp/n1.err" && [ -L "$tmp/n1/store.token" ] && [ "$(cat "$tmp/precious")" = precious ] &&
    ok "a link where the token file goes: one line, exit 2, nothing changed" ||
    fail "a link where the token file goes (exit $rc)" "$tmp/n1.err"
rm "$tmp/n1/store.token"
echo theirs >"$tmp/n1/store.token"
chown 65534 "$tmp/n1/store.token" 2>/dev/null && {
    "$ddpc" run --nnodes 2 --master-addr 192.0.2.1 --master-port 29999 --log-dir "$tmp/n1" \
        -- true >"$tmp/n2.out" 2>"$tmp/n2.err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/n2.err")" -eq 1 ] && grep -q "^ddpc run: cannot write the \
job's token file $tmp/n1/store.token: it belongs to another user (uid 65534)" "$tmp/n2.err" &&
        [ "$(cat "$tmp/n1/store.token")" = theirs ] &&
        ok "another user's file where the token file goes: one line, exit 2, unchanged" ||
        fail "another user's token file (exit $rc)" "$tmp/n2.err"
}

# A --master-addr that is not this host's (a NAT or virtual IP): node 0 names the override.
DDPC_STORE_TOKEN=$token "$ddpc" run --nnodes 2 --master-addr 192.0.2.1 --master-port 29999 \
    -- true >"$tmp/na.out" 2>"$tmp/na.err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/na.err")" -eq 1 ] &&
    grep -q "^ddpc run: node 0 cannot serve the \
rendezvous at 192.0.2.1:29999: cannot listen on 192.0.2.1 (192.0.2.1): it is not an address of \
this host (a NAT or virtual IP?); set DDPC_STORE_BIND" "$tmp/na.err" &&
    ok "a master address not of this host names DDPC_STORE_BIND" ||
    fail "master address not of this host (exit $rc)" "$tmp/na.err"

# A token file others can read is refused; a 0600 one serves the whole job.
printf '%s\n' "$token" >"$tmp/token"
chmod 644 "$tmp/token"
DDPC_STORE_TOKEN_FILE=$tmp/token "$ddpc" run --nproc-per-node 1 -- true \
    >"$tmp/tf.out" 2>"$tmp/tf.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/tf.err")" -eq 1 ] &&
    grep -q "^ddpc run: DDPC_STORE_TOKEN_FILE=$tmp/token has mode 0644" "$tmp/tf.err" &&
    ok "a token file others can read: one line, exit 2" ||
    fail "token file 0644 (exit $rc)" "$tmp/tf.err"
chmod 600 "$tmp/token"

# One host: the workers get the job's token (never the file's name) with nothing asked of the user.
"$ddpc" run --nproc-per-node 2 -- \
    sh -c 'echo "${#DDPC_STORE_TOKEN} ${DDPC_STORE_TOKEN_FILE:-none}"' \
    >"$tmp/one.out" 2>&1
check "one host: each worker gets a generated 64-digit token" \
    test "$(grep -c '^\(\[[^]]*\] \)\?64 none$' "$tmp/one.out")" -eq 2 || cat "$tmp/one.out"
DDPC_STORE_TOKEN_FILE=$tmp/token "$ddpc" run --nproc-per-node 1 -- \
    sh -c 'echo "$DDPC_STORE_TOKEN"' \
    >"$tmp/file.out" 2>&1
check "one host: a token file's token reaches the workers" grep -q "$token" "$tmp/file.out"
"$ddpc" run --nproc-per-node 2 --backend gloo -- "$ddpc" train "$cfg" "${common[@]}" \
    run_dir="$tmp/g1" weights_out="$tmp/g1.st" >"$tmp/g1.log" 2>&1
rc=$?
if grep -q "built without gloo" "$tmp/g1.log"; then
    ok "one host, gloo: not built (skipped)"
else
    check "one host, gloo: rank 0's store takes the launcher's token (exit $rc)" test $rc -eq 0 ||
        cat "$tmp/g1.log"
fi

# `ddpc env` lists the store's variables but never the token itself.
DDPC_STORE_TOKEN=never-print-this-secret-0123 DDPC_STORE_BIND=127.0.0.1 "$ddpc" env \
    >"$tmp/env.out" 2>&1
check "ddpc env names DDPC_STORE_BIND" grep -q "DDPC_STORE_BIND=127.0.0.1" "$tmp/env.out"
check "ddpc env never prints the token" bash -c "! grep -q never-print-this '$tmp/env.out'"

# Workers a platform started across hosts (gloo) without a token: refused, naming the fix.
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 GROUP_WORLD_SIZE=2 \
    MASTER_ADDR=192.0.2.1 MASTER_PORT=29999 DDPC_BACKEND=gloo \
    "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/pf" >"$tmp/pf.out" 2>"$tmp/pf.err"
rc=$?
if grep -q "built without gloo" "$tmp/pf.err"; then
    ok "platform gloo workers: not built (skipped)"
else
    [ $rc -ne 0 ] && grep -q "the gloo backend's store at MASTER_ADDR 192.0.2.1:29999 spans hosts \
but no token was given: set DDPC_STORE_TOKEN" "$tmp/pf.err" &&
        ok "platform gloo workers across hosts need a token" ||
        fail "platform gloo without a token (exit $rc)" "$tmp/pf.err"
fi
summary
