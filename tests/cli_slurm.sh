#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real SLURM (Debian's slurm-wlm + munge) on this machine: scripts/slurm-cluster starts munged,
# slurmctld and slurmd in a scratch directory, then examples/slurm/train.sbatch runs as a 2-task
# job under `sbatch --wait`. Checks: its ranks come from SLURM's step variables and use the mpi
# backend, it exits 0 and trains to the same bytes as `ddpc run --nproc-per-node 2` (shm); a job
# with a bad config fails and sbatch says so; `ddpc run` inside an allocation (workers of its own,
# and the mpirun hand-off) trains the same bytes; srun without an MPI plugin is refused with the
# fix named, and with DDPC_BACKEND=shm trains the same bytes. Needs root (slurmd runs job steps
# as their user): CI runs as root; without root it fails, and `ctest -LE slurm` leaves it out.
# usage: cli_slurm.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

if [ "$(id -u)" -ne 0 ]; then
    fail "cli_slurm needs root to start slurmd (CI runs as root); 'ctest -LE slurm' leaves it out"
    summary
    exit 1
fi
for p in sbatch srun scontrol munged slurmctld slurmd; do
    if ! command -v "$p" >/dev/null; then
        fail "'$p' is missing: run scripts/setup (slurm-wlm munge)"
        summary
        exit 1
    fi
done

cluster="$src/scripts/slurm-cluster"
dir="$tmp/cluster"
# Stop exactly this cluster's daemons on every exit; --owner covers a SIGKILL of this script.
# 6 CPUs on the node let the three jobs below run side by side: sbatch --wait polls at 2, 6, 14,
# 24 s, so jobs in a row would cost far more than their run time.
trap '"$cluster" stop "$dir" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
if ! "$cluster" start "$dir" --owner $$ --cpus 6 >"$tmp/start.log" 2>&1; then
    fail "the one-machine cluster starts" "$tmp/start.log"
    summary
    exit 1
fi
ok "the one-machine cluster starts (node idle)"
export SLURM_CONF="$dir/slurm.conf"
export OMP_NUM_THREADS=1
cd "$tmp" || exit 1

config="$src/configs/fmnist_mlp.yaml"
train=(max_steps=30 log_every=10 eval_every=0)

# submit NAME SBATCH_ARGS...: sbatch --wait with a deadline; the job's log goes to $tmp/NAME.out,
# sbatch's output (the job id) to $tmp/NAME.sbatch and its exit status to $tmp/NAME.rc.
submit() {
    local name=$1
    shift
    DDPC="$ddpc" timeout 180 sbatch --wait --parsable --output="$tmp/$name.out" "$@" \
        >"$tmp/$name.sbatch" 2>&1
    echo $? >"$tmp/$name.rc"
}
# result NAME: $rc and $job of a finished submit.
result() {
    rc=$(cat "$tmp/$1.rc")
    job=$(head -n 1 "$tmp/$1.sbatch" | cut -d';' -f1)
}
# stopped DIR: the cluster in DIR has no daemon running.
stopped() { ! "$cluster" status "$1" >/dev/null 2>&1; }
# none_running TEXT: no process has TEXT in its command line.
none_running() { ! pgrep -f -- "$1" >/dev/null; }
# job_field ID FIELD: FIELD=value of `scontrol show job` (finished jobs stay for MinJobAge).
job_field() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# Inside an allocation the batch script is no rank (no step id), so `ddpc run` may start workers:
# its own shm workers, or with --backend mpi an mpirun that takes the node from SLURM.
cat >"$tmp/inner.sh" <<EOF
#!/bin/bash
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$config" ${train[*]} run_dir="$tmp/inner" \\
    weights_out="$tmp/inner.safetensors" >"$tmp/inner.log" 2>&1
echo \$? >"$tmp/inner.status"
"$ddpc" run --backend mpi --nproc-per-node 2 -- "$ddpc" train "$config" ${train[*]} \\
    run_dir="$tmp/handoff" weights_out="$tmp/handoff.safetensors" >"$tmp/handoff.log" 2>&1
echo \$? >"$tmp/handoff.status"
"$ddpc" run --nnodes 2 --nproc-per-node 1 -- "$ddpc" train "$config" >"$tmp/twonodes.log" 2>&1
echo \$? >"$tmp/twonodes.status"
EOF

# without OMP_NUM_THREADS the script takes --cpus-per-task (1); the bad job passes its own
(unset OMP_NUM_THREADS
 submit train "$src/examples/slurm/train.sbatch" "$config" "${train[@]}" run_dir="$tmp/slurm" \
     weights_out="$tmp/slurm.safetensors") &
# a bad config: both ranks stop before training, srun and the job exit non-zero
OMP_NUM_THREADS=3 submit bad "$src/examples/slurm/train.sbatch" "$config" "${train[@]}" \
    run_dir="$tmp/bad" optim.bogus_key=1 &
submit inner --ntasks=2 "$tmp/inner.sh" &
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$config" "${train[@]}" run_dir="$tmp/shm" \
    weights_out="$tmp/shm.safetensors" >"$tmp/shm.log" 2>&1
check "ddpc run --nproc-per-node 2 trains" test $? -eq 0
wait

result train
if [ "$rc" -eq 0 ]; then ok "sbatch --wait train.sbatch exits 0"; else
    fail "sbatch --wait train.sbatch exits 0 (got $rc)" "$tmp/train.sbatch" "$tmp/train.out"; fi
check "job $job is COMPLETED with exit code 0:0" \
    test "$(job_field "$job" JobState) $(job_field "$job" ExitCode)" = "COMPLETED 0:0"
check "the job ran 2 tasks" test "$(job_field "$job" NumTasks)" = 2
for r in 0 1; do
    check "job log: task $r is rank $r of 2 from SLURM's variables" \
        grep -Eq "^ *$r: +Rank: +$r of 2\$" "$tmp/train.out"
    check "job log: task $r's rank source is slurm" \
        grep -Eq "^ *$r: +Source: +slurm\$" "$tmp/train.out"
    check "job log: task $r picks the mpi backend" \
        grep -Eq "^ *$r: +Backend: +mpi \(chosen automatically\)\$" "$tmp/train.out"
done
check "job log: 2 ranks train with the mpi backend" \
    grep -q "128 per rank x 2 ranks x 1 accumulation step (backend mpi" "$tmp/train.out"
check "job log: 30 steps ran" grep -q "^step     30/30" "$tmp/train.out"
check "job log: 2 tasks, 1 thread each (--cpus-per-task)" \
    grep -q "^train.sbatch: job $job on .*: 2 tasks, 1 thread(s) each" "$tmp/train.out"
check "jobcomp.txt records the job as COMPLETED" \
    grep -q "^JobId=$job .*JobState=COMPLETED" "$dir/jobcomp.txt"
check "the SLURM job's weights equal ddpc run's, byte for byte" \
    cmp "$tmp/slurm.safetensors" "$tmp/shm.safetensors"

# srun without an MPI plugin (this cluster's MpiDefault=none, SLURM's default): Open MPI cannot
# start there, so ddpc says what to do instead of MPI_Init's abort; on one node shm works.
timeout 120 srun -n 2 --kill-on-bad-exit=1 "$ddpc" train "$config" "${train[@]}" \
    run_dir="$tmp/nompi" >"$tmp/nompi.log" 2>&1
st=$?
check "srun without --mpi=pmix fails (got $st)" test $st -ne 0
check "... naming 'srun --mpi=pmix'" grep -q \
    "^ddpc train: this srun step started its 2 tasks without an MPI plugin .*'srun --mpi=pmix'" \
    "$tmp/nompi.log"
DDPC_BACKEND=shm timeout 120 srun -n 2 "$ddpc" train "$config" "${train[@]}" \
    run_dir="$tmp/srunshm" weights_out="$tmp/srunshm.safetensors" >"$tmp/srunshm.log" 2>&1
check "DDPC_BACKEND=shm srun -n 2 trains the same bytes" \
    cmp "$tmp/srunshm.safetensors" "$tmp/shm.safetensors"

result bad
scontrol show job -o "$job" >"$tmp/bad.job" 2>&1
if [ "$rc" -ne 0 ]; then ok "sbatch --wait of a job with a bad config exits non-zero (got $rc)"; else
    fail "sbatch --wait of a job with a bad config exits non-zero (got $rc)" "$tmp/bad.sbatch" \
        "$tmp/bad.out" "$tmp/bad.job" "$dir/jobcomp.txt" "$dir/slurmctld.log"; fi
check "job $job is FAILED" test "$(job_field "$job" JobState)" = FAILED
check "its log names the bad key" grep -q "bogus_key" "$tmp/bad.out"
check "OMP_NUM_THREADS set at submission reaches the job" \
    grep -q "^train.sbatch: job $job on .*: 2 tasks, 3 thread(s) each" "$tmp/bad.out"
check "jobcomp.txt records it as FAILED" grep -q "^JobId=$job .*JobState=FAILED" "$dir/jobcomp.txt"

result inner
check "a batch script running ddpc run exits 0 (got $rc)" test "$rc" -eq 0
check "ddpc run inside sbatch exits 0" grep -qx 0 "$tmp/inner.status"
check "ddpc run inside sbatch trains the same bytes" \
    cmp "$tmp/inner.safetensors" "$tmp/shm.safetensors"
check "ddpc run --backend mpi inside sbatch exits 0" grep -qx 0 "$tmp/handoff.status"
check "... hands the job to mpirun" grep -q "^ddpc run: exec .*mpirun -np 2 " "$tmp/handoff.log"
check "... and trains the same bytes" cmp "$tmp/handoff.safetensors" "$tmp/shm.safetensors"
check "ddpc run --nnodes 2 in a 1-node allocation exits 2" grep -qx 2 "$tmp/twonodes.status"
want="^ddpc run: --nnodes 2 but the SLURM allocation (SLURM_JOB_NODELIST=$(hostname -s)) has 1 host"
check "... naming the allocation's hosts" grep -q "$want" "$tmp/twonodes.log"

# scripts/slurm-cluster itself: status, a second cluster beside this one stopped by its watchdog
# when its owner exits, a daemon that fails to start, and stop.
"$cluster" status "$dir" >"$tmp/status.log" 2>&1
check "status exits 0 with the three daemons running" test $? -eq 0
check "... and the node idle" grep -qx "node: idle" "$tmp/status.log"
sleep 60 &
owner=$!
"$cluster" start "$tmp/c2" --owner $owner >"$tmp/c2.log" 2>&1
check "a second cluster starts beside the first" test $? -eq 0
kill $owner
wait $owner 2>/dev/null
for _ in $(seq 100); do
    none_running "$tmp/c2/" && break
    sleep 0.2
done
check "its watchdog stops it once its owner exits, leaving none of its processes" \
    none_running "$tmp/c2/"
check "... and status says so" stopped "$tmp/c2"
mkdir "$tmp/fake"
printf '#!/bin/sh\necho "fake slurmd: cannot bind" >&2\nexit 1\n' >"$tmp/fake/slurmd"
chmod +x "$tmp/fake/slurmd"
PATH="$tmp/fake:$PATH" "$cluster" start "$tmp/c3" >"$tmp/c3.log" 2>&1
check "a daemon that fails to start fails start" test $? -ne 0
check "... naming it" grep -q "slurm-cluster: slurmd did not start" "$tmp/c3.log"
check "... showing its log" grep -q "fake slurmd: cannot bind" "$tmp/c3.log"
check "... and stopping the daemons it had started" none_running "$tmp/c3/"
"$cluster" stop "$dir"
check "stop leaves none of the cluster's processes" none_running "$dir/"
check "... nor its watchdog" none_running "slurm-cluster watch $dir"

summary
