#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fault tests of `ddpc run` with small shell workers: the worker environment, a killed or failing
# rank stopping the others within 5 s, restarts, Ctrl-C leaving no process behind, nested launch
# refused, two jobs at once, log files and --tee, bad options, and the mpirun hand-off.
# usage: cli_run.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK TORCHELASTIC_RUN_ID DDPC_LAUNCHER OMPI_COMM_WORLD_SIZE PMI_SIZE

# bad NAME [FILE...]: a failed check, then each existing FILE's lines prefixed with its name.
bad() {
    fail "$1"
    shift
    for f in "$@"; do [ -f "$f" ] && sed "s|^|    $(basename "$f"): |" "$f"; done
}
# Seconds since the epoch with milliseconds.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# True when no process whose command line contains $1 is left (zombies aside).
none_left() { ! pgrep -f -- "$1" >/dev/null; }
# Waits up to $2 seconds for none_left $1.
wait_none_left() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do none_left "$1" && return 0; sleep 0.05; done
    return 1
}

# 1. Every worker gets torchrun's environment; the job exits 0.
"$ddpc" run --nproc-per-node 3 --max-restarts 2 -- bash -c 'echo "R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE \
LW=$LOCAL_WORLD_SIZE G=$GROUP_RANK RR=$ROLE_RANK RW=$ROLE_WORLD_SIZE A=$MASTER_ADDR \
P=$MASTER_PORT C=$TORCHELASTIC_RESTART_COUNT M=$TORCHELASTIC_MAX_RESTARTS \
ID=$TORCHELASTIC_RUN_ID D=$DDPC_LAUNCHER"' >"$tmp/env.out" 2>"$tmp/env.err"
rc=$?
good=1
for r in 0 1 2; do
    grep -qE "^R=$r L=$r W=3 LW=3 G=0 RR=$r RW=3 A=127.0.0.1 P=[1-9][0-9]* C=0 M=2 ID=ddpc-[0-9a-f-]+ D=1$" \
        "$tmp/env.out" || good=0
done
ports=$(sed -n 's/.* P=\([0-9]*\) .*/\1/p' "$tmp/env.out" | sort -u | wc -l)
[ $rc -eq 0 ] && [ $good -eq 1 ] && [ "$ports" -eq 1 ] && ok "worker environment" ||
    bad "worker environment (exit $rc)" "$tmp/env.out" "$tmp/env.err"

# 2. kill -9 of one worker: the others are gone within 5 s; the launcher names rank and signal.
"$ddpc" run --nproc-per-node 3 -- bash -c "echo \$\$ >$tmp/pid.\$RANK; exec sleep 61.$$" \
    >"$tmp/k.out" 2>"$tmp/k.err" &
launcher=$!
for i in $(seq 1200); do [ -s "$tmp/pid.0" ] && [ -s "$tmp/pid.1" ] && [ -s "$tmp/pid.2" ] && break; sleep 0.05; done
t0=$(now)
kill -9 "$(cat "$tmp/pid.1")"
wait_none_left "^sleep 61\.$$" 5
gone=$?
took=$(elapsed "$t0")
wait $launcher
rc=$?
[ $gone -eq 0 ] && [ $rc -eq 137 ] && grep -q "rank 1 (local rank 1" "$tmp/k.err" &&
    grep -q "signal SIGKILL" "$tmp/k.err" && ok "kill -9: others gone in ${took}s, exit $rc" ||
    bad "kill -9 (gone=$gone after ${took}s, exit $rc)" "$tmp/k.err"

# 3. A worker exiting 3: the launcher exits 3 naming the rank and quoting its last lines.
"$ddpc" run --nproc-per-node 2 -- bash -c '[ $RANK = 1 ] && { echo "about to fail"; exit 3; }; sleep 30' \
    >"$tmp/e.out" 2>"$tmp/e.err"
rc=$?
[ $rc -eq 3 ] && grep -q "rank 1 .*failed with exit code 3" "$tmp/e.err" &&
    grep -q "\[rank 1/2\] about to fail" "$tmp/e.err" && ok "exit 3 is the launcher's status" ||
    bad "exit 3 (exit $rc)" "$tmp/e.err"

# 4. --max-restarts 1: the group restarts once and sees TORCHELASTIC_RESTART_COUNT=1.
"$ddpc" run --nproc-per-node 2 --max-restarts 1 -- bash -c \
    'echo "rank $RANK count $TORCHELASTIC_RESTART_COUNT"; [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 0 ] && exit 1; sleep 0.1' \
    >"$tmp/r.out" 2>"$tmp/r.err"
rc=$?
[ $rc -eq 0 ] && grep -q "rank 0 count 1" "$tmp/r.out" && grep -q "rank 1 count 1" "$tmp/r.out" &&
    [ "$(grep -c "restarting all workers" "$tmp/r.err")" -eq 1 ] && ok "one restart with count 1" ||
    bad "restart (exit $rc)" "$tmp/r.out" "$tmp/r.err"

# 5. Ctrl-C (SIGINT to the launcher) leaves no process behind. Job control gives the background
#    launcher the default SIGINT disposition an interactive shell's foreground job has.
set -m
"$ddpc" run --nproc-per-node 3 -- bash -c "exec sleep 62.$$" >"$tmp/c.out" 2>"$tmp/c.err" &
launcher=$!
set +m
for i in $(seq 100); do [ "$(pgrep -f "^sleep 62\.$$" | wc -l)" -eq 3 ] && break; sleep 0.05; done
started=$(pgrep -f "^sleep 62\.$$" | wc -l)
kill -INT $launcher
wait $launcher
rc=$?
wait_none_left "^sleep 62\.$$" 5
gone=$?
[ "$started" -eq 3 ] && [ $rc -eq 130 ] && [ $gone -eq 0 ] && ! kill -0 $launcher 2>/dev/null &&
    grep -q "got SIGINT" "$tmp/c.err" && ok "Ctrl-C: exit 130, nothing left" ||
    bad "Ctrl-C (started $started, exit $rc, gone=$gone)" "$tmp/c.err"

# 6. Nested launch: `ddpc run` inside a worker is refused with an explanation.
"$ddpc" run -- "$ddpc" run --nproc-per-node 2 -- true >"$tmp/n.out" 2>"$tmp/n.err"
rc=$?
[ $rc -eq 2 ] && grep -q "refusing to start inside a worker of another launcher" "$tmp/n.err" &&
    ok "nested launch refused" || bad "nested launch (exit $rc)" "$tmp/n.err"
TORCHELASTIC_RUN_ID=outer "$ddpc" run -- true 2>"$tmp/n2.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/n2.err")" -eq 1 ] && ok "torchrun worker refused" ||
    bad "nested under torchrun (exit $rc)" "$tmp/n2.err"

# 7. Two jobs at once get different ports and run ids, and both succeed.
"$ddpc" run --nproc-per-node 2 -- bash -c 'echo "$MASTER_PORT $TORCHELASTIC_RUN_ID"; sleep 0.3' \
    >"$tmp/j1.out" 2>"$tmp/j1.err" &
j1=$!
"$ddpc" run --nproc-per-node 2 -- bash -c 'echo "$MASTER_PORT $TORCHELASTIC_RUN_ID"; sleep 0.3' \
    >"$tmp/j2.out" 2>"$tmp/j2.err" &
j2=$!
wait $j1; rc1=$?
wait $j2; rc2=$?
p1=$(sort -u "$tmp/j1.out"); p2=$(sort -u "$tmp/j2.out")
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(echo "$p1" | wc -l)" -eq 1 ] && [ -n "$p1" ] &&
    [ "${p1%% *}" != "${p2%% *}" ] && [ "${p1#* }" != "${p2#* }" ] &&
    ok "two jobs: '$p1' vs '$p2'" || bad "two jobs (exit $rc1 $rc2)" "$tmp/j1.out" "$tmp/j2.out"

# 8. --log-dir writes DIR/attempt_K/rank_R.log; --tee also prefixes console lines.
"$ddpc" run --nproc-per-node 2 --log-dir "$tmp/logs" -- bash -c 'echo "out $RANK"; echo "err $RANK" >&2' \
    >"$tmp/l.out" 2>"$tmp/l.err"
rc=$?
[ $rc -eq 0 ] && grep -qx "out 1" "$tmp/logs/attempt_0/rank_1.log" &&
    grep -qx "err 0" "$tmp/logs/attempt_0/rank_0.log" && [ ! -s "$tmp/l.out" ] &&
    ok "--log-dir files, console quiet" || bad "--log-dir (exit $rc)" "$tmp/l.out" "$tmp/l.err"
"$ddpc" run --nproc-per-node 2 --tee --log-dir "$tmp/logs2" -- bash -c 'echo "out $RANK"; echo "err $RANK" >&2' \
    >"$tmp/t.out" 2>"$tmp/t.err"
rc=$?
[ $rc -eq 0 ] && grep -qx "\[rank 1/2\] out 1" "$tmp/t.out" && grep -qx "\[rank 0/2\] err 0" "$tmp/t.err" &&
    grep -qx "out 0" "$tmp/logs2/attempt_0/rank_0.log" && ok "--tee prefixes" ||
    bad "--tee (exit $rc)" "$tmp/t.out" "$tmp/t.err"

# 8b. Through a pipe, a line reaches the reader when it is printed, not when the job ends: the
# worker waits (up to 60 s) for the reader to have read its first line before it goes on.
mark="$tmp/read.mark"
"$ddpc" run -- bash -c "echo first; for i in \$(seq 600); do [ -e '$mark' ] && break; sleep 0.1
    done; [ -e '$mark' ] && echo seen || echo unseen" 2>/dev/null |
    { read -r line; touch "$mark"; cat >"$tmp/piped.out"; }
grep -qx seen "$tmp/piped.out" && ok "piped console line read while the worker runs" ||
    bad "piped console line held back until the worker ended" "$tmp/piped.out"

# 9. Bad options: one clear line on stderr, exit 2.
expect_usage() { # name, expected substring, args... (RUN_PATH: PATH for ddpc only)
    local name=$1 want=$2
    shift 2
    env PATH="${RUN_PATH:-$PATH}" "$ddpc" run "$@" >"$tmp/u.out" 2>"$tmp/u.err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/u.err")" -eq 1 ] && grep -qF -- "$want" "$tmp/u.err" &&
        ok "$name: $(cat "$tmp/u.err")" || bad "$name (exit $rc)" "$tmp/u.err"
}
expect_usage "zero workers" "--nproc-per-node: '0'" --nproc-per-node 0 true
expect_usage "unknown option" "unknown option '--bogus'" --bogus true
expect_usage "unknown backend" "--backend: 'ucc'" --backend ucc true
expect_usage "no program" "no PROGRAM given" --nproc-per-node 2
expect_usage "missing value" "--log-dir needs a value" --log-dir
expect_usage "program not found" "'no-such-program-$$' was not found in PATH" no-such-program-$$
expect_usage "nnodes without hosts" "--nnodes 2 needs the hosts" --nnodes 2 true
printf 'localhost slots=2\n' >"$tmp/hosts"
expect_usage "restarts under mpirun" "--max-restarts 1 is not available" --hostfile "$tmp/hosts" --max-restarts 1 true
RUN_PATH=/nonexistent expect_usage "mpirun missing" "mpirun was not found in PATH" --hostfile "$tmp/hosts" /bin/true
"$ddpc" run --help >"$tmp/h.out" 2>&1 && grep -q -- "--nproc-per-node" "$tmp/h.out" && ok "--help" ||
    bad "--help" "$tmp/h.out"

# 10. --hostfile naming localhost runs a 2-rank job through mpirun.
if command -v mpirun >/dev/null; then
    "$ddpc" run --nproc-per-node 2 --hostfile "$tmp/hosts" --collective-timeout 9 -- bash -c \
        'echo "ompi $OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE $DDPC_BACKEND $DDPC_COLLECTIVE_TIMEOUT"' \
        >"$tmp/m.out" 2>"$tmp/m.err"
    rc=$?
    [ $rc -eq 0 ] && grep -qx "ompi 0/2 mpi 9" "$tmp/m.out" && grep -qx "ompi 1/2 mpi 9" "$tmp/m.out" &&
        grep -q "ddpc run: exec .*mpirun -np 2 --hostfile .* --map-by ppr:2:node" "$tmp/m.err" &&
        ok "--hostfile localhost: 2 ranks through mpirun" || bad "mpirun (exit $rc)" "$tmp/m.out" "$tmp/m.err"
else
    bad "--hostfile test needs mpirun (Open MPI) installed"
fi

none_left "^sleep 6[0-9]\.$$" && ok "no worker left behind" || bad "workers left behind"
summary
