# SPDX-License-Identifier: MIT
# The cases of a per-node launch (`ddpc run --nnodes 2 --node-rank R ...` on each of two hosts),
# sourced by a driver that defines where the "hosts" are:
#   on_host I CMD...   runs CMD on host I (in the foreground; drivers background it themselves)
#   host_addr I        the address host I reaches the others by
#   master_port        a port free on host 0
# and has sourced tests/lib/check.sh ($tmp, ok/fail). tests/cli_run_nodes.sh runs them with two
# launchers on this machine (127.0.0.1); tests/multihost/run_nodes.sh on two network namespaces.
# Every wait is bounded; each case checks that no worker and no launcher is left. A new case is
# one more function here, called by both drivers: `launch NAME I OPTIONS -- PROGRAM` on each
# host, `finish`, then checks on $tmp/NAME.I.{out,err}, $rc0 and $rc1 (a training case runs
# `ddpc train` as PROGRAM with run_dir/weights_out under $tmp, shared by both hosts).

export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK TORCHELASTIC_RUN_ID DDPC_LAUNCHER OMPI_COMM_WORLD_SIZE PMI_SIZE

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# Waits up to $2 seconds until no process's command line matches $1.
wait_none_left() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do pgrep -f -- "$1" >/dev/null || return 0; sleep 0.05; done
    return 1
}
# Waits up to $2 seconds for every file named in $1 (a glob) to exist non-empty, $3 of them.
wait_files() {
    local i n
    for ((i = 0; i < $2 * 20; i++)); do
        n=$(find "$(dirname "$1")" -maxdepth 1 -name "$(basename "$1")" -size +0 | wc -l)
        [ "$n" -ge "$3" ] && return 0
        sleep 0.05
    done
    return 1
}
host_name() { hostname; }

# launch NAME I [ddpc run options...] -- PROGRAM...: starts host I's launcher in the background,
# output in $tmp/NAME.I.{out,err}; its pid (of the local process that runs it) in launched[I].
launched=()
launch() {
    local name=$1 i=$2
    shift 2
    on_host "$i" timeout 120 "$ddpc" run --nnodes 2 --node-rank "$i" --master-addr "$(host_addr 0)" \
        --master-port "$port" "$@" >"$tmp/$name.$i.out" 2>"$tmp/$name.$i.err" &
    launched[$i]=$!
}
# finish: waits for both launchers; their exit codes in rc0, rc1.
finish() {
    wait "${launched[0]}"
    rc0=$?
    wait "${launched[1]}"
    rc1=$?
}

# 1. torchrun's contract on every rank of both hosts: node-major ranks, one run id and port.
case_env() {
    port=$(master_port)
    local w='echo "R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE G=$GROUP_RANK'
    w+=' GW=$GROUP_WORLD_SIZE RR=$ROLE_RANK RW=$ROLE_WORLD_SIZE A=$MASTER_ADDR P=$MASTER_PORT'
    w+=' C=$TORCHELASTIC_RESTART_COUNT M=$TORCHELASTIC_MAX_RESTARTS ID=$TORCHELASTIC_RUN_ID'
    w+=' S=$TORCHELASTIC_USE_AGENT_STORE D=$DDPC_LAUNCHER"'
    launch env 1 --nproc-per-node 2 --max-restarts 3 -- sh -c "$w"
    launch env 0 --nproc-per-node 2 --max-restarts 3 --run-id job-7 -- sh -c "$w"
    finish
    local good=1 r g l
    for r in 0 1 2 3; do
        g=$((r / 2))
        l=$((r % 2))
        grep -qx "R=$r L=$l W=4 LW=2 G=$g GW=2 RR=$r RW=4 A=$(host_addr 0) P=$port C=0 M=3 \
ID=job-7 S=True D=1" "$tmp/env.$g.out" || good=0
    done
    [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $good -eq 1 ] &&
        ok "2 hosts x 2: torchrun's variables on every rank" ||
        fail "2 hosts x 2 env (exit $rc0/$rc1)" "$tmp/env.0.out" "$tmp/env.1.out" "$tmp/env.0.err" \
            "$tmp/env.1.err"
}

# 2. kill -9 of a worker on host 1 stops every rank on both hosts; both reports name it.
case_worker_killed() {
    port=$(master_port)
    local tag="61.$$$RANDOM"
    mkdir -p "$tmp/wk"
    local w="echo up \$RANK; echo \$\$ >$tmp/wk/pid.\$RANK; exec sleep $tag"
    launch wk 0 --nproc-per-node 2 -- sh -c "$w"
    launch wk 1 --nproc-per-node 2 -- sh -c "$w"
    wait_files "$tmp/wk/pid.*" 30 4 || fail "worker kill: workers did not start"
    local t0
    t0=$(now)
    kill -9 "$(cat "$tmp/wk/pid.3")"
    wait_none_left "^sleep $tag" 10
    local gone=$?
    local took
    took=$(elapsed "$t0")
    finish
    local who="node 1 (host $(host_name), $(host_addr 1))"
    local what="rank 3 (local rank 1, pid [0-9]*) on $who failed with signal SIGKILL on attempt 0"
    [ $gone -eq 0 ] && [ $rc0 -eq 137 ] && [ $rc1 -eq 137 ] &&
        grep -q "^ddpc run: $what" "$tmp/wk.1.err" &&
        grep -q "^ddpc run: stopped the 2 local worker(s) of node 0 (host $(host_name), \
$(host_addr 0)): $what" "$tmp/wk.0.err" &&
        grep -q "    \[rank 3/4\] up 3" "$tmp/wk.0.err" &&
        ok "worker killed on host 1: every rank gone in ${took}s, both name node 1 rank 3" ||
        fail "worker killed on host 1 (gone=$gone after ${took}s, exit $rc0/$rc1)" \
            "$tmp/wk.0.err" "$tmp/wk.1.err"
}

# 3. host 1's launcher killed: host 0 names node 1 after the agent timeout; host 1's workers die
# with their launcher; nothing is left.
case_launcher_killed() {
    local victim=$1 other=$((1 - $1))
    port=$(master_port)
    local tag="62.$$$RANDOM" name="lk$victim"
    mkdir -p "$tmp/$name"
    local w="echo \$\$ >$tmp/$name/pid.\$RANK; exec sleep $tag"
    launch "$name" 0 --nproc-per-node 2 --agent-timeout 3 -- sh -c "$w"
    launch "$name" 1 --nproc-per-node 2 --agent-timeout 3 -- sh -c "$w"
    wait_files "$tmp/$name/pid.*" 30 4 || fail "launcher kill: workers did not start"
    # the launcher is the `timeout` child of the process on_host started: its own pid
    local lpid
    lpid=$(pgrep -f -- "--node-rank $victim --master-addr $(host_addr 0) --master-port $port " |
        while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = ddpc ] && echo "$p"; done)
    local t0
    t0=$(now)
    kill -9 $lpid
    wait_none_left "^sleep $tag" 15
    local gone=$?
    local took
    took=$(elapsed "$t0")
    finish
    local rc_other=$rc1
    [ "$other" -eq 0 ] && rc_other=$rc0
    local said
    if [ "$victim" -eq 1 ]; then
        said="node 1 (host $(host_name), $(host_addr 1)) has not been heard from for [0-9]* s \
(--agent-timeout): its launcher was killed or its host is unreachable"
    else
        said="the store of node 0 (host $(host_name), $(host_addr 0)) at $(host_addr 0):$port \
stopped answering: node 0's launcher exited or its host is unreachable"
    fi
    [ -n "$lpid" ] && [ $gone -eq 0 ] && [ "$rc_other" -eq 1 ] &&
        grep -q "$said" "$tmp/$name.$other.err" &&
        wait_none_left "--master-port $port " 10 &&
        ok "launcher of host $victim killed: host $other names it, all gone in ${took}s" ||
        fail "launcher of host $victim killed (pid '$lpid', gone=$gone after ${took}s, exit \
$rc_other)" "$tmp/$name.$other.err"
}

# 4. --max-restarts 1: a worker on host 1 fails on the first attempt only; every node restarts,
# the second attempt succeeds, both exit 0.
case_restart() {
    port=$(master_port)
    local w='if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 2 ]; then echo dying; exit 3;'
    w+=' fi; sleep 0.3; echo "done $RANK $TORCHELASTIC_RESTART_COUNT"'
    launch rs 0 --nproc-per-node 2 --max-restarts 1 -- sh -c "$w"
    launch rs 1 --nproc-per-node 2 --max-restarts 1 -- sh -c "$w"
    finish
    local good=1 r
    for r in 0 1 2 3; do grep -qx "done $r 1" "$tmp/rs.$((r / 2)).out" || good=0; done
    [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $good -eq 1 ] &&
        grep -q "restarting all workers on every node (restart 1 of 1)" "$tmp/rs.0.err" &&
        grep -q "rank 2 (local rank 0, pid [0-9]*) on node 1 .* failed with exit code 3" \
            "$tmp/rs.0.err" &&
        ok "--max-restarts 1: a failure on host 1 restarts both hosts, then exit 0" ||
        fail "--max-restarts across hosts (exit $rc0/$rc1)" "$tmp/rs.0.out" "$tmp/rs.0.err" \
            "$tmp/rs.1.out" "$tmp/rs.1.err"
}

# 5. A failure that exhausts the restarts: both launchers exit with the worker's status (5).
case_exit_code() {
    port=$(master_port)
    launch ec 0 --nproc-per-node 1 -- sh -c 'sleep 0.2; [ "$RANK" = 1 ] && exit 5; sleep 30'
    launch ec 1 --nproc-per-node 1 -- sh -c 'sleep 0.2; [ "$RANK" = 1 ] && exit 5; sleep 30'
    finish
    [ $rc0 -eq 5 ] && [ $rc1 -eq 5 ] && grep -q "failed with exit code 5" "$tmp/ec.0.err" &&
        ok "a worker's exit code 5 on host 1 is both launchers' exit code" ||
        fail "exit code across hosts ($rc0/$rc1)" "$tmp/ec.0.err" "$tmp/ec.1.err"
}

# 6. SIGINT to host 1's launcher stops both hosts; no restart; 130 on both.
case_interrupt() {
    port=$(master_port)
    local tag="63.$$$RANDOM"
    mkdir -p "$tmp/in"
    local w="echo \$\$ >$tmp/in/pid.\$RANK; exec sleep $tag"
    launch in 0 --nproc-per-node 1 --max-restarts 2 -- sh -c "$w"
    launch in 1 --nproc-per-node 1 --max-restarts 2 -- sh -c "$w"
    wait_files "$tmp/in/pid.*" 30 2 || fail "interrupt: workers did not start"
    local lpid
    lpid=$(pgrep -f -- "--node-rank 1 --master-addr $(host_addr 0) --master-port $port " |
        while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = ddpc ] && echo "$p"; done)
    kill -INT $lpid
    wait_none_left "^sleep $tag" 10
    local gone=$?
    finish
    [ $gone -eq 0 ] && [ $rc0 -eq 130 ] && [ $rc1 -eq 130 ] &&
        grep -q "the launcher of node 1 (host $(host_name), $(host_addr 1)) got SIGINT" \
            "$tmp/in.0.err" && ! grep -q "restarting all" "$tmp/in.0.err" &&
        ok "SIGINT to host 1's launcher stops both hosts, no restart, exit 130" ||
        fail "SIGINT across hosts (gone=$gone, exit $rc0/$rc1)" "$tmp/in.0.err" "$tmp/in.1.err"
}

# 7. Rendezvous: a node that never comes is named; a node rank given twice is named; nodes that
# disagree on --nproc-per-node are named.
case_rendezvous() {
    port=$(master_port)
    on_host 0 timeout 60 "$ddpc" run --nnodes 2 --node-rank 0 --master-addr "$(host_addr 0)" \
        --master-port "$port" --rdzv-timeout 1.5 -- true >"$tmp/rz.out" 2>"$tmp/rz.err"
    local rc=$?
    [ $rc -eq 1 ] && grep -q "^ddpc run: node 1 did not join within 1.5 s (--rdzv-timeout)" \
        "$tmp/rz.err" && ok "rendezvous: a missing node is named (exit $rc)" ||
        fail "rendezvous: missing node (exit $rc)" "$tmp/rz.err"

    # nodes 0 and 1 of 3, node 1 twice: the rendezvous cannot complete before the second claim
    port=$(master_port)
    local i
    for i in 0 1 2; do
        on_host $((i > 0)) timeout 60 "$ddpc" run --nnodes 3 --node-rank $((i > 0)) \
            --master-addr "$(host_addr 0)" --master-port "$port" --rdzv-timeout 30 -- true \
            >"$tmp/dup.$i.out" 2>"$tmp/dup.$i.err" &
        launched[$i]=$!
        sleep 0.3
    done
    local rcs=""
    for i in 0 1 2; do
        wait "${launched[$i]}"
        rcs+="$? "
    done
    local said="ddpc run: --node-rank 1 was given to two launchers: host $(host_name), \
$(host_addr 1) and host $(host_name), $(host_addr 1); give each host its own node rank"
    [ "$rcs" = "2 2 2 " ] && grep -q "$said" "$tmp/dup.0.err" && grep -q "$said" "$tmp/dup.1.err" &&
        grep -q "$said" "$tmp/dup.2.err" &&
        ok "rendezvous: a node rank taken twice is named on every host, all exit 2" ||
        fail "rendezvous: node rank twice (exit $rcs)" "$tmp/dup.0.err" "$tmp/dup.1.err" \
            "$tmp/dup.2.err"

    port=$(master_port)
    launch np 0 --nproc-per-node 2 --rdzv-timeout 20 -- true
    launch np 1 --nproc-per-node 1 --rdzv-timeout 20 -- true
    finish
    local said="node 0 (host $(host_name), $(host_addr 0)) was started with --nproc-per-node 2 but \
node 1 (host $(host_name), $(host_addr 1)) with --nproc-per-node 1; every host must be given the \
same --nproc-per-node"
    [ $rc0 -eq 2 ] && [ $rc1 -eq 2 ] && grep -q "$said" "$tmp/np.0.err" &&
        grep -q "$said" "$tmp/np.1.err" &&
        ok "rendezvous: disagreeing --nproc-per-node is named on both hosts" ||
        fail "rendezvous: disagreeing options (exit $rc0/$rc1)" "$tmp/np.0.err" "$tmp/np.1.err"

    port=$(master_port)
    launch id 0 --run-id job-a --rdzv-timeout 20 -- true
    launch id 1 --run-id job-b --rdzv-timeout 20 -- true
    finish
    said="node 0 (host $(host_name), $(host_addr 0)) runs job 'job-a' but node 1 (host $(host_name), \
$(host_addr 1)) was given --run-id job-b; give every host the same --run-id, or none but node 0"
    [ $rc0 -eq 2 ] && [ $rc1 -eq 2 ] && grep -q "$said" "$tmp/id.0.err" &&
        grep -q "$said" "$tmp/id.1.err" && ok "rendezvous: a different --run-id is named on both" ||
        fail "rendezvous: run ids (exit $rc0/$rc1)" "$tmp/id.0.err" "$tmp/id.1.err"
}
