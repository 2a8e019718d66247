#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hang recorder through `ddpc run`: rank 1 of 3 is SIGSTOPped while training; the others time
# out in their next all_reduce, the message says where rank 1 stopped (its phase and its last
# collective) and where ranks 0 and 2 wait, and both write flight/rank<k>.json: valid JSON, their
# last 64 collectives oldest first, the failed one last with the sequence number of the message.
# With flight.enabled=false the same hang writes no files.
# usage: cli_train_flight.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

py=/usr/bin/python3
cfg=$src/configs/fmnist_mlp.yaml
# dist.timeout_s: long enough that no rank of three on a loaded 2-core machine times out before
# rank 1 is stopped (3 s did, once, under CI-like load).
common=(data.type=synthetic_images data.size=20000 epochs=100 num_threads=1 log_every=10
    dist.timeout_s=10)

# hang NAME [keys]: 3 ranks train until step 80 is logged (more than 64 collectives), then rank 1
# is SIGSTOPped; waits for the launcher (at most 150 s) and leaves its exit status in $rc.
hang() {
    local name=$1 pid p
    shift
    timeout 150 "$ddpc" run --nproc-per-node 3 -- "$ddpc" train "$cfg" "${common[@]}" \
        run_dir="$tmp/$name" "$@" >"$tmp/$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 1200); do
        grep -q '"step": 80,' "$tmp/$name/metrics.jsonl" 2>/dev/null && break
        sleep 0.1
    done
    for p in $(pgrep -f -- "run_dir=$tmp/$name"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx RANK=1 &&
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddpc ]; then
            kill -STOP "$p"
            stopped=$p
        fi
    done
    wait "$pid"
    rc=$?
}

stopped=
hang on
check "a SIGSTOPped rank fails the run (exit $rc, not the 150 s deadline's 124)" \
    test "$rc" -ne 0 -a "$rc" -ne 124
check "rank 1 was found and stopped" test -n "$stopped"
phase="(data|forward|backward|optimizer|eval|checkpoint)"
re="all_reduce #([0-9]+) timed out after 10 s: rank 1 never arrived; rank 1 (is still in $phase \
after [a-z_]+ #[0-9]+|entered all_reduce #[0-9]+ \(in $phase\) but stopped inside it); ranks 0, 2 \
wait in all_reduce #"
check "the message says where rank 1 stopped and where ranks 0, 2 wait" grep -Eq "$re" "$tmp/on.log"
seq=$(grep -Eo "$re" "$tmp/on.log" | head -1 | sed -E 's/^all_reduce #([0-9]+).*/\1/')
for r in 0 2; do
    f=$tmp/on/flight/rank$r.json
    check "rank $r wrote flight/rank$r.json" test -s "$f"
    $py - "$f" "$r" "${seq:--1}" >"$tmp/check$r.log" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rank, seq = int(sys.argv[2]), int(sys.argv[3])
c = d["collectives"]
assert d["rank"] == rank and d["world"] == 3 and d["backend"] == "shm", d
assert len(c) == 64, len(c)
assert [e["seq"] for e in c] == list(range(c[0]["seq"], c[0]["seq"] + 64)), "not oldest first"
assert c[-1]["seq"] == seq and c[-1]["state"] == "failed" and c[-1]["end_s"] is None, c[-1]
assert all(e["state"] == "done" and e["end_s"] >= e["start_s"] for e in c[:-1])
assert all(a["start_s"] <= b["start_s"] for a, b in zip(c, c[1:])), "not in time order"
assert {e["phase"] for e in c} <= {"setup", "data", "forward", "backward", "optimizer", "eval"}
assert "never arrived" in d["error"], d["error"]
print("ok")
PY
    check "... valid JSON: 64 collectives oldest first, the last one #${seq:-?} failed" \
        grep -qx ok "$tmp/check$r.log" || cat "$tmp/check$r.log"
done
check "the stopped rank wrote none" test ! -e "$tmp/on/flight/rank1.json"
none_left() { ! pgrep -f -- "run_dir=$tmp/on" >/dev/null; }
check "no worker is left" none_left

stopped=
hang off flight.enabled=false
check "flight.enabled=false: the hang still fails the run (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "... and writes no flight records" test ! -e "$tmp/off/flight"
if [ $failed -ne 0 ]; then tail -n 8 "$tmp"/*.log; fi
summary
