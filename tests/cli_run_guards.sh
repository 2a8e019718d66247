#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The launcher's guards through the CLI: nothing a worker started outlives the job (a worker's
# background child is gone when `ddpc run` returns, after a failure or a success; a SIGKILLed
# launcher takes every worker and its children with it, also after its guard process was killed
# and replaced); `ddpc run` inside a platform-injected worker environment (RANK, LOCAL_RANK,
# WORLD_SIZE set) refuses with the explanation and exits 2; launcher families that disagree (a
# stale RANK=0 WORLD_SIZE=1 under mpirun -np 2) make every rank fail, naming both, instead of two
# single-rank jobs that both exit 0; families that agree train.
# usage: cli_run_guards.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE TORCHELASTIC_RUN_ID DDPC_LAUNCHER

# Each worker of these jobs starts a background child (sleep 301.PID) and then becomes sleep
# 300.PID; both write their pids to $tmp/NAME.{worker,child}.RANK. A pid counts as ours only while
# its command line is one of those sleeps, so a reused pid or a zombie is never mistaken for one.
mark=$$
ours() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -q "^sleep 30[01]\.$mark "; }
# The recorded pids of job $1 (2 ranks: 4 pids), once all are written, within 30 s.
job_pids() {
    local i r
    for ((i = 0; i < 600; i++)); do
        local n=0
        for r in 0 1; do
            [ -s "$tmp/$1.worker.$r" ] && [ -s "$tmp/$1.child.$r" ] && n=$((n + 1))
        done
        [ $n -eq 2 ] && cat "$tmp/$1".{worker,child}.[01] && return 0
        sleep 0.05
    done
    return 1
}
# How many of the pids $@ are still ours.
alive_count() {
    local n=0 p
    for p in "$@"; do ours "$p" && n=$((n + 1)); done
    echo $n
}
# Waits up to 30 s until none of the pids $@ is alive; true when none is.
wait_all_gone() {
    local i
    for ((i = 0; i < 600; i++)); do [ "$(alive_count "$@")" -eq 0 ] && return 0; sleep 0.05; done
    return 1
}
# Kills what a failed check left behind (only processes that are still ours).
reap_left() {
    local p
    for p in "$@"; do ours "$p" && kill -9 "$p"; done
    return 0
}
# The worker command of job $1: rank $2 (or none: -1) exits 3 once every pid is written.
worker_cmd() {
    echo "sleep 301.$mark & echo \$! >$tmp/$1.child.\$RANK; echo \$\$ >$tmp/$1.worker.\$RANK;
if [ \$RANK = $2 ]; then
    for i in \$(seq 600); do [ -s $tmp/$1.child.0 ] && exit 3; sleep 0.05; done
fi; exec sleep 300.$mark"
}
# The guard of launcher $1 (pid on stdout): its one child that is not a worker of job $2.
guard_of() {
    local g
    g=$(pgrep -P "$1" | grep -vxF -f <(cat "$tmp/$2".worker.[01]))
    [ -n "$g" ] && [ "$(echo "$g" | wc -l)" -eq 1 ] && echo "$g"
}

# G1. One worker fails: when ddpc run returns, both workers' background children are gone too.
"$ddpc" run --nproc-per-node 2 -- bash -c "$(worker_cmd fail 1)" >"$tmp/f.out" 2>"$tmp/f.err"
rc=$?
pids=$(job_pids fail)
left=$(alive_count $pids)
[ $rc -eq 3 ] && [ -n "$pids" ] && [ "$left" -eq 0 ] &&
    ok "a worker fails: its and the others' background children are gone when ddpc run returns" ||
    fail "worker failure (exit $rc, $left of 4 pids alive: $(echo $pids))" "$tmp/f.err"
reap_left $pids

# G2. Every worker succeeds and leaves a background child behind: gone when ddpc run returns.
"$ddpc" run --nproc-per-node 2 -- bash -c "sleep 301.$mark & echo \$! >$tmp/ok.child.\$RANK;
echo \$\$ >$tmp/ok.worker.\$RANK" >"$tmp/s.out" 2>"$tmp/s.err"
rc=$?
pids=$(cat "$tmp"/ok.child.[01])
left=$(alive_count $pids)
[ $rc -eq 0 ] && [ -n "$pids" ] && [ "$left" -eq 0 ] &&
    ok "workers succeed: their background children are gone when ddpc run returns" ||
    fail "success with background children (exit $rc, $left alive)" "$tmp/s.err"
reap_left $pids

# G3. SIGKILL of the launcher (guard alive): every worker and every worker's child is gone.
"$ddpc" run --nproc-per-node 2 -- bash -c "$(worker_cmd kill -1)" >"$tmp/k.out" 2>"$tmp/k.err" &
launcher=$!
pids=$(job_pids kill)
before=$(alive_count $pids)
kill -9 $launcher
wait $launcher 2>/dev/null
wait_all_gone $pids && [ "$before" -eq 4 ] &&
    ok "SIGKILL of the launcher: workers and their children gone" ||
    fail "SIGKILL of the launcher ($before, then $(alive_count $pids) of 4 pids alive)" "$tmp/k.err"
reap_left $pids

# G4. The guard is killed: the launcher says so and starts a new one, which takes everything
# down when the launcher is SIGKILLed afterwards.
"$ddpc" run --nproc-per-node 2 -- bash -c "$(worker_cmd guard -1)" >"$tmp/g.out" 2>"$tmp/g.err" &
launcher=$!
pids=$(job_pids guard)
before=$(alive_count $pids)
guard=$(guard_of $launcher guard)
[ -n "$guard" ] && kill -9 "$guard"
noticed=1
for ((i = 0; i < 600; i++)); do
    grep -q "^ddpc run: the guard process (pid $guard) ended with signal SIGKILL; started guard 2 \
(pid [0-9]*), which watches the 2 running worker group(s)\.$" "$tmp/g.err" && noticed=0 && break
    sleep 0.05
done
new_guard=$(guard_of $launcher guard)
kill -9 $launcher
wait $launcher 2>/dev/null
wait_all_gone $pids
gone=$?
[ -n "$guard" ] && [ $noticed -eq 0 ] && [ -n "$new_guard" ] && [ "$new_guard" != "$guard" ] &&
    [ $gone -eq 0 ] && [ "$before" -eq 4 ] &&
    ok "guard killed: replaced (pid $guard -> $new_guard); a later SIGKILL leaves nothing" ||
    fail "guard killed (guard '$guard' -> '$new_guard', noticed=$noticed, gone=$gone, \
$before, then $(alive_count $pids) of 4 pids alive)" "$tmp/g.err"
reap_left $pids

# 1. A platform started this process as a worker: ddpc run refuses, starts nothing.
RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 \
    "$ddpc" run --nproc-per-node 2 -- sh -c "touch $tmp/started" >"$tmp/p.out" 2>"$tmp/p.err"
rc=$?
[ $rc -eq 2 ] && [ ! -e "$tmp/started" ] &&
    grep -q "^ddpc run: refusing to start: RANK=5, LOCAL_RANK=1 and WORLD_SIZE=8 are set" \
        "$tmp/p.err" && grep -q "a second level of workers" "$tmp/p.err" &&
    grep -q "run the program directly instead (e.g. 'ddpc train CONFIG')" "$tmp/p.err" &&
    ok "platform-injected worker: ddpc run refuses (exit 2), starts nothing" ||
    fail "platform-injected worker (exit $rc)" "$tmp/p.err"

# 2. The issue's case: a stale RANK=0 WORLD_SIZE=1 under mpirun -np 2. Each rank fails naming
# both families; before, two independent single-rank jobs ran and both exited 0.
train=(train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=64 epochs=1
       log_every=100 data.batch_size=16 data.eval_batch_size=16)
if ! command -v mpirun >/dev/null 2>&1; then
    fail "mpirun is not installed (openmpi-bin, see scripts/setup): the families case needs it"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    RANK=0 WORLD_SIZE=1 timeout 120 mpirun --oversubscribe --mca btl self,vader -np 2 \
        "$ddpc" "${train[@]}" run_dir="$tmp/stale" >"$tmp/m.out" 2>"$tmp/m.err"
    rc=$?
    n=$(grep -c "^ddpc train: RANK=0 WORLD_SIZE=1 (torchrun style) disagree with \
OMPI_COMM_WORLD_RANK=[01] OMPI_COMM_WORLD_SIZE=2 (mpirun): mpirun started 2 processes that would \
not form one job" "$tmp/m.err")
    [ $rc -ne 0 ] && [ "$n" -ge 1 ] && [ ! -e "$tmp/stale/metrics.jsonl" ] &&
        ok "stale RANK=0 WORLD_SIZE=1 under mpirun -np 2: fails (exit $rc) naming both" ||
        fail "stale torchrun variables under mpirun (exit $rc, $n messages)" "$tmp/m.err"

    # 3. Agreeing families (a wrapper that exports both) are one job of 2 ranks.
    timeout 120 mpirun --oversubscribe --mca btl self,vader -np 2 sh -c \
        'RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE exec "$0" "$@"' \
        "$ddpc" "${train[@]}" dist.backend=mpi run_dir="$tmp/agree" >"$tmp/a.out" 2>"$tmp/a.err"
    rc=$?
    [ $rc -eq 0 ] && grep -q "x 2 ranks" "$tmp/a.out" "$tmp/a.err" &&
        ok "agreeing torchrun and mpirun variables: one job of 2 ranks" ||
        fail "agreeing families (exit $rc)" "$tmp/a.out" "$tmp/a.err"
fi
summary
