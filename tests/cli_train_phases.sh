#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The per-step phase breakdown and per-rank records in metrics.jsonl (issue #13), through
# `ddpc train` on 1 rank and `ddpc run` on 2: every progress record has the phase/* keys, step_s
# and comm_s, the phases add up to step_s within 5%, a rank_step_s/<k> record follows it for
# every rank, mem/*/<k> records come after warm-up and at the end, and log.phases: false
# drops the phase keys. The GPU's device-time phases (gpu_phase/*, docs/observability.md) are
# absent on the CPU: tests/gpu/train_checks.sh checks them on a GPU.
# usage: cli_train_phases.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
[ -x "$py" ] || py=python3
small=(max_steps=12 log_every=4 eval_every=0 eval_batches=1 optim.warmup_steps=2 model.n_layer=1
       model.n_embd=32 model.n_head=2 model.block_size=32 data.batch_size=4
       checkpoint.every_steps=6)

# check_metrics FILE WORLD PHASES: the records' keys and sums (PHASES: 1 on, 0 off).
check_metrics() {
    "$py" - "$1" "$2" "$3" <<'PY'
import json, sys
path, world, phases = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
recs = [json.loads(l) for l in open(path)]
progress = [r for r in recs if "loss" in r and "epoch" in r]
assert len(progress) == 3, f"{len(progress)} progress records"
names = ["data_s", "forward_s", "backward_s", "comm_exposed_s", "optimizer_s", "checkpoint_s",
         "other_s"]
for r in progress:
    assert "gpu_phase" not in r, r  # the CPU's phases are its own clock's: no device time
    if not phases:
        assert "phase" not in r and "step_s" not in r, r
        continue
    ph = r["phase"]
    for n in names:
        assert n in ph and ph[n] >= 0, (n, r)
    total = sum(ph[n] for n in names)
    assert abs(total - r["step_s"]) <= 0.05 * r["step_s"], (total, r)
    assert r["comm_s"] >= 0 and (world == 1 or r["comm_s"] > 0), r
    ranks = [q for q in recs if q["step"] == r["step"] and "rank_step_s" in q]
    assert len(ranks) == 1, ranks
    got = ranks[0]["rank_step_s"]
    assert sorted(got) == [str(k) for k in range(world)], got
    assert all(v > 0 for v in got.values()), got
    assert abs(got["0"] - r["step_s"]) <= 1e-6 * r["step_s"] + 1e-9, (got, r)
if phases:  # checkpoint.every_steps=6: the save after step 6 counts in step 7's window (5..8)
    assert [r["phase"]["checkpoint_s"] > 0 for r in progress] == [False, True, False], progress
mem = [r for r in recs if "mem" in r]
assert [r["step"] for r in mem] == [1, 12], [r["step"] for r in mem]
for r in mem:
    for k in range(world):
        for n in ["peak_alloc_bytes", "rss_bytes", "rss_peak_bytes"]:
            assert r["mem"][f"{n}/{k}"] > 0, (n, k, r)
print("metrics ok")
PY
}

"$ddpc" train "$src/configs/gpt_fortunes.yaml" "${small[@]}" run_dir="$tmp/one" >"$tmp/one.log" 2>&1
check "1 rank trains" test $? -eq 0
check_metrics "$tmp/one/metrics.jsonl" 1 1 >"$tmp/one.check" 2>&1
check "1 rank: phases add up to step_s, per-rank records" test $? -eq 0 || cat "$tmp/one.check"

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/gpt_fortunes.yaml" "${small[@]}" \
    run_dir="$tmp/two" >"$tmp/two.log" 2>&1
check "2 ranks train" test $? -eq 0
check_metrics "$tmp/two/metrics.jsonl" 2 1 >"$tmp/two.check" 2>&1
check "2 ranks: phases add up to step_s, both ranks' step times and memory" test $? -eq 0 ||
    cat "$tmp/two.check" "$tmp/two.log"

"$ddpc" train "$src/configs/gpt_fortunes.yaml" "${small[@]}" log.phases=false run_dir="$tmp/off" \
    >"$tmp/off.log" 2>&1
check "log.phases: false trains" test $? -eq 0
check_metrics "$tmp/off/metrics.jsonl" 1 0 >"$tmp/off.check" 2>&1
check "log.phases: false leaves the phase keys out" test $? -eq 0 || cat "$tmp/off.check"
summary
