#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# profile.steps (issue #13): `ddpc run` on 2 ranks with profile.steps=[20,24] writes one Chrome
# trace <run_dir>/trace.json: valid JSON, both ranks' pids named "rank k" with named threads
# (compute, comm, loader), "X" events ordered by ts and properly nested within each thread, steps
# 20..24 only, collectives with op and bytes; parallel.mode dp traces its parts (replicate,
# scatter, parallel apply, reduce) on compute and each further replica's forward and backward on
# a "replica k" thread; without profile.steps there is no trace; a bad profile.steps is refused.
# usage: cli_train_trace.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
[ -x "$py" ] || py=python3
small=(max_steps=26 log_every=5 eval_every=0 eval_batches=1 optim.warmup_steps=2 model.n_layer=1
       model.n_embd=32 model.n_head=2 model.block_size=32 data.batch_size=4)

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/gpt_fortunes.yaml" "${small[@]}" \
    'profile.steps=[20,24]' run_dir="$tmp/two" >"$tmp/two.log" 2>&1
check "2 ranks train with profile.steps" test $? -eq 0 || cat "$tmp/two.log"
check "the log names the trace" grep -q "^trace of steps 20..24: .*/trace.json" "$tmp/two.log"
# check_trace FILE MODE (ddp: 2 ranks; dp: 1 process of 2 replicas)
check_trace() {
"$py" - "$1" "$2" <<'PY'
import json, sys
d, mode = json.load(open(sys.argv[1])), sys.argv[2]
pids = (0, 1) if mode == "ddp" else (0,)
ev = d["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert procs == {p: "rank %d" % p for p in pids}, procs
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
           if e["ph"] == "M" and e["name"] == "thread_name"}
xs = [e for e in ev if e["ph"] == "X"]
assert all(e["ph"] in ("M", "X") for e in ev)
def on(thread, name):
    return [e for e in xs if threads[(e["pid"], e["tid"])] == thread and e["name"] == name]
for pid in pids:
    names = {threads[(p, t)] for (p, t) in threads if p == pid}
    steps = sorted(e["args"]["step"] for e in xs if e["pid"] == pid and e["name"] == "step")
    assert steps == [20, 21, 22, 23, 24], steps
    if mode == "dp":
        assert {n for n in names if not n.startswith("loader")} == {"compute", "replica 1"}, names
        assert on("compute", "data")
        for n in ("replicate", "scatter", "parallel apply", "forward", "backward", "reduce",
                  "optimizer"):
            assert len(on("compute", n)) == 5, (n, len(on("compute", n)))
        assert len(on("replica 1", "forward")) == len(on("replica 1", "backward")) == 5
        # each replica's passes lie inside the compute thread's parallel apply
        spans = [(e["ts"], e["ts"] + e["dur"]) for e in on("compute", "parallel apply")]
        for e in on("replica 1", "forward") + on("replica 1", "backward"):
            assert any(a - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= b + 1e-3 for a, b in spans), e
        continue
    assert {"compute", "comm"} <= names and any(n.startswith("loader") for n in names), names
    for n in ("data", "forward", "backward", "comm wait", "optimizer"):
        assert any(e["name"] == n and e["pid"] == pid for e in xs), n
    comm = [e for e in xs if e["pid"] == pid and threads[(pid, e["tid"])] == "comm"]
    assert comm and all(e["args"]["op"] and e["args"]["bytes"] > 0 for e in comm), comm[:3]
eps = 1e-3  # microseconds: ts and dur are printed with 3 decimals of exact nanoseconds
for key in threads:
    track = [e for e in xs if (e["pid"], e["tid"]) == key]
    assert all((e["pid"], e["tid"]) in threads for e in xs)
    assert [e["ts"] for e in track] == sorted(e["ts"] for e in track), key
    stack = []
    for e in track:
        while stack and stack[-1] <= e["ts"] + eps:
            stack.pop()
        end = e["ts"] + e["dur"]
        assert not stack or end <= stack[-1] + eps, (key, e)
        stack.append(end)
# The compute thread's phases lie inside the profiled steps.
for pid in pids:
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e["pid"] == pid and e["name"] == "step"]
    for e in xs:
        if e["pid"] == pid and threads[(pid, e["tid"])] == "compute" and e["name"] != "step":
            assert any(a - eps <= e["ts"] and e["ts"] + e["dur"] <= b + eps for a, b in spans), e
print("trace ok:", len(xs), "events")
PY
}
check_trace "$tmp/two/trace.json" ddp >"$tmp/check.out" 2>&1
check "trace.json: both ranks, named threads, nested and ordered events of steps 20..24" \
    test $? -eq 0 || cat "$tmp/check.out"

"$ddpc" train "$src/configs/fmnist_cnn.yaml" data.type=synthetic_images data.size=512 \
    data.batch_size=8 max_steps=26 log_every=5 eval_every=0 test_batches=1 num_threads=2 \
    parallel.mode=dp parallel.replicas=2 'model.channels=[4,8]' 'model.hidden=[16]' \
    'profile.steps=[20,24]' run_dir="$tmp/dp" >"$tmp/dp.log" 2>&1
check "parallel.mode dp trains with profile.steps" test $? -eq 0 || cat "$tmp/dp.log"
check_trace "$tmp/dp/trace.json" dp >"$tmp/check_dp.out" 2>&1
check "trace.json of dp: replicate, scatter, parallel apply, reduce; replica 1's passes inside" \
    test $? -eq 0 || cat "$tmp/check_dp.out"

"$ddpc" train "$src/configs/gpt_fortunes.yaml" "${small[@]}" max_steps=4 run_dir="$tmp/none" \
    >"$tmp/none.log" 2>&1
check "without profile.steps there is no trace" test $? -eq 0 -a ! -e "$tmp/none/trace.json"
"$ddpc" train "$src/configs/gpt_fortunes.yaml" "${small[@]}" 'profile.steps=[5,3]' \
    run_dir="$tmp/bad" >"$tmp/bad.log" 2>&1
check "profile.steps [5, 3] is refused" test $? -ne 0
check "naming the key" grep -q "profile.steps must be \[first, last\]" "$tmp/bad.log"
summary
