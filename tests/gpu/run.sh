#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs ON the lent GPU machine, from the repo root, after tests/gpu/prepare.sh packed .gpu/ here
# and the device call carried it. Each part runs under its own timeout and a global deadline, and
# one failing part prints FAILED and the script goes on; the benchmark table is printed LAST.
# Logs go to a scratch folder and are re-packed into $OUT/logs.tar.gz after every part, so a
# killed run still returns what it did ($OUT gives back at most 8 files). Exits 1 when anything
# FAILED, else 0.
#
# usage: tests/gpu/run.sh [--only PARTS] [--skip PARTS] [--deadline SECONDS] [--steps N]
#   PARTS, comma-separated: env kernels comm train candidates multi profile models ddpc eager
#   llmc compile (run in this order), or the groups checks (kernels,comm,train,candidates,
#   multi), peers (eager,llmc,compile), bench (ddpc and the peers). candidates: the kernel tests and
#   train_checks again with DDPC_CUDA_CANDIDATES naming every candidate kernel in src
#   (candidates.cu); with it, ddpc runs under each alone and all together, profile under all.
#   multi: every tests/gpu/multi_*.sh (several ranks on GPU 0, 150 s each). comm: test_cuda_comm
#   (collectives on GPU buffers: 1 rank nccl, 2 ranks staged on GPU 0) and `ddpc bench allreduce
#   --device cuda` for nccl and for staging, into $OUT/comm.txt.
#   profile (bench/gpu_step_profile: the step's phases and every kernel-table member's time at
#   GPT-2 124M's shapes; under a minute) and models (ddpc bench step against bench/torch_step.py
#   on the small GPT, MLP and CNN at fp32, TF32 and bf16, into $OUT/models.md; about 2 minutes)
#   run only when named in --only.
#   --deadline: seconds for the whole run (default 420); a part never runs past it.
#   --steps: training steps of each benchmark row (default 30; the first 10 are warm-up).
# environment: OUT (default ./gpu-out), DDPC_GPU_DIR (default ./.gpu), DDPC_GPU_PYTHON
#   (default python3), PEAK_TFLOPS (default 989: dense bf16, H100 SXM and H200), DDPC_DEVICE_ARGS
#   (default "device=cuda": the override that puts ddpc's run on the GPU), DDPC_TRAIN_ARGS (more
#   overrides for ddpc's benchmark run; default none: a GPU run's memory plan is held to the
#   GPU's memory), DDPC_GPU_CANDIDATES (default: every name src passes to ddpc__cuda_candidate).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
all_parts="env kernels comm train candidates multi profile models ddpc eager llmc compile"
only="" skip="" deadline=420 steps=30
while [ $# -gt 0 ]; do
    case $1 in
    --only) only="$only,$2"; shift 2 ;;
    --skip) skip="$skip,$2"; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    -h | --help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
expand() {
    local w
    for w in ${1//,/ }; do
        case $w in
        checks) echo kernels comm train candidates multi ;;
        peers) echo eager llmc compile ;;
        bench) echo ddpc eager llmc compile ;;
        env | kernels | comm | train | candidates | multi | profile | models | ddpc | eager | \
            compile | llmc)
            echo "$w" ;;
        *) echo "run.sh: unknown part '$w' (parts: $all_parts, checks, peers, bench)" >&2
            exit 2 ;;
        esac
    done
}
only_list=$(expand "$only") || exit 2
skip_list=$(expand "$skip") || exit 2
only_list=$(echo $only_list)
skip_list=$(echo $skip_list)
wants() {
    case " $skip_list " in *" $1 "*) return 1 ;; esac
    # profile and models are opt-in: they run only when --only names them.
    [ -z "$only_list" ] && [ "$1" != profile ] && [ "$1" != models ] && return 0
    case " $only_list " in *" $1 "*) return 0 ;; esac
    return 1
}

gpu=${DDPC_GPU_DIR:-$root/.gpu}
out=${OUT:-$root/gpu-out}
py=${DDPC_GPU_PYTHON:-python3}
peak=${PEAK_TFLOPS:-989}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpc-gpu.XXXXXX")
logs=$work/logs
mkdir -p "$out" "$logs"
rows=$out/results.jsonl
checks=$out/checks.txt
: >"$rows"
: >"$checks"
start=$SECONDS
B=16 T=1024
shards=$gpu/shards
train_glob="$shards/random_train_*.bin"
val_glob="$shards/random_val_*.bin"

# Logs back to $OUT in one file, after every part (and at exit).
pack_logs() { tar -czf "$out/logs.tar.gz" -C "$work" logs 2>/dev/null; }
trap pack_logs EXIT

# run_part NAME LIMIT CMD...: runs CMD with its output in $logs/NAME.log under min(LIMIT, what
# the deadline leaves less 15 s for the table). Sets part_rc (124 or 137: timed out; 125: not
# started, the deadline being near) and part_s. PART_CWD, when set, is the folder it runs in.
run_part() {
    local name=$1 limit=$2 left t0
    shift 2
    left=$((deadline - (SECONDS - start) - 15))
    part_s=0
    if [ "$left" -lt 10 ]; then
        echo "not started: the ${deadline} s deadline is near" >"$logs/$name.log"
        part_rc=125
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    t0=$SECONDS
    (cd "${PART_CWD:-$root}" && exec timeout -k 5 "$limit" "$@") >"$logs/$name.log" 2>&1
    part_rc=$?
    part_s=$((SECONDS - t0))
    pack_logs
}
verdict() {
    case $1 in
    0) echo PASS ;;
    77) echo SKIPPED ;;
    124 | 137) echo "FAILED (timeout)" ;;
    125) echo "NOT RUN (deadline)" ;;
    *) echo "FAILED (exit $1)" ;;
    esac
}
check_line() { # NAME VERDICT SECONDS
    printf '%-34s %-18s %4s s\n' "$1" "$2" "$3" | tee -a "$checks"
}

# --- The GPU, always first.
echo "== GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap \
    --format=csv,noheader 2>&1 | head -1)"

# --- Unpack .gpu/ (prepare.sh's archives) into .gpu/bin and .gpu/lib; Python's tarfile where
# the image has no xz.
untar='import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])'
for a in bin libs; do
    if [ -f "$gpu/$a.tar.xz" ]; then
        tar -xJf "$gpu/$a.tar.xz" -C "$gpu" 2>/dev/null ||
            "$py" -W ignore -c "$untar" "$gpu/$a.tar.xz" "$gpu" ||
            echo "run.sh: cannot unpack $gpu/$a.tar.xz"
    fi
done
[ -f "$gpu/MANIFEST" ] && head -3 "$gpu/MANIFEST"
bin=$gpu/bin
ddpc=$bin/ddpc

# --- Libraries. Ours go first only where the system lacks the name, except OpenBLAS (our
# OpenMP build) and oneDNN (the version ddpc was built with); CUDA's come from the toolkit or
# from PyTorch's pip packages. The path is set for ddpc, its tests and llm.c only: PyTorch keeps
# its own.
uselib=$gpu/lib-use
rm -rf "$uselib"
mkdir -p "$uselib"
sys_libs=$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}')
for f in "$gpu"/lib/*; do
    [ -e "$f" ] || continue
    n=$(basename "$f")
    case $n in
    libopenblas* | libdnnl*) ln -sf "$f" "$uselib/$n" ;;
    *) printf '%s\n' "$sys_libs" | grep -qxF "$n" || ln -sf "$f" "$uselib/$n" ;;
    esac
done
site_dirs=$("$py" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
find_so() { # prints the folder holding the library named $1, or nothing
    local d p ldp=${LD_LIBRARY_PATH:-} # set -u: unset would end the function at once
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib \
        /usr/local/nvidia/lib64 ${ldp//:/ }; do
        [ -e "$d/$1" ] && { echo "$d"; return; }
    done
    p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')
    [ -n "$p" ] && { dirname "$p"; return; }
    for d in $site_dirs; do
        p=$(find "$d/nvidia" -name "$1" 2>/dev/null | head -1)
        [ -n "$p" ] && { dirname "$p"; return; }
    done
}
libpath=$uselib
missing=""
for n in $(for e in "$bin"/*; do LD_LIBRARY_PATH=$uselib ldd "$e" 2>/dev/null; done |
    awk '/not found/ {print $1}' | sort -u) libnccl.so.2; do
    d=$(find_so "$n")
    if [ -n "$d" ]; then
        case ":$libpath:" in *":$d:"*) ;; *) libpath=$d:$libpath ;; esac
    elif [ "$n" != libnccl.so.2 ]; then
        missing="$missing $n"
    fi
done
libenv=(env "LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
echo "== libraries: $libpath"
[ -n "$missing" ] && echo "== NOT FOUND anywhere:$missing"

# --- env: the machine's facts, for the notes.
if wants env; then
    {
        echo "## nvidia-smi"
        nvidia-smi 2>&1
        nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit \
            --format=csv 2>&1
        echo "## machine"
        uname -a
        nproc
        free -g 2>&1 | head -2
        grep -m1 'model name' /proc/cpuinfo
        echo "## nvcc"
        (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -2
        echo "## where the CUDA libraries are"
        for n in libcublas.so.13 libcublasLt.so.13 libcudart.so.13 libnccl.so.2 libcuda.so.1 \
            libcudnn.so.9; do
            echo "$n: $(find_so "$n")"
        done
        ls -d /usr/local/cuda* 2>&1
        echo "## python and torch"
        "$py" - <<'EOF' 2>&1
import sys
print("python", sys.version.split()[0], sys.executable)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
          torch.backends.cudnn.version(), "gpu", torch.cuda.get_device_name(0))
    p = torch.cuda.get_device_properties(0)
    print("SMs", p.multi_processor_count, "memory GiB", round(p.total_memory / 2**30, 1))
    try:
        import triton
        print("triton", triton.__version__)
    except ImportError as ex:
        print("triton: none", ex)
    # The bf16 matrix ceiling, on random data (KINDS.md: 769-798 TFLOP/s on an H200).
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        a @ b
    e.record()
    torch.cuda.synchronize()
    print("bf16 matmul 8192^3: %.0f TFLOP/s" % (2 * n**3 * 20 / (s.elapsed_time(e) / 1e3) / 1e12))
except Exception as ex:
    print("torch probe failed:", repr(ex))
EOF
        echo "## ldd ddpc (with the path above)"
        "${libenv[@]}" ldd "$ddpc" 2>&1
        echo "## ddpc env"
        "${libenv[@]}" timeout 30 "$ddpc" env >"$logs/ddpc_env.log" 2>&1
        echo "(exit $?)" >>"$logs/ddpc_env.log"
        cat "$logs/ddpc_env.log"
    } >"$logs/env.log" 2>&1
    cp "$logs/env.log" "$out/env.txt"
    pack_logs
    grep -E '^(python|torch|triton|SMs|bf16 matmul|lib[a-zA-Z]+\.so\.[0-9]+:)' "$logs/env.log" |
        sed 's/^/   /'
    echo "   ddpc env:"
    grep -iE 'cuda|gpu|nccl|^\(exit' "$logs/ddpc_env.log" | head -n 12 | cut -c1-160 |
        sed 's/^/     /'
fi

# --- kernels: every CUDA kernel test against the CPU kernels. kernel_tests SUFFIX [VAR=VALUE...]:
# each test under that environment, its check named with SUFFIX.
kernel_tests() {
    local suffix=$1 n=0 exe t v
    shift
    for exe in "$bin"/test_cuda_*; do
        [ -x "$exe" ] || continue
        t=$(basename "$exe")
        [ "$t" = test_cuda_comm ] && continue # the comm part's
        n=$((n + 1))
        run_part "$t$suffix" 120 "${libenv[@]}" "$@" DDPC_SOURCE_DIR="$root" DDPC_BIN="$ddpc" \
            OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}" "$exe"
        v=$(verdict "$part_rc")
        check_line "$t$suffix" "$v" "$part_s"
        [ "$v" = PASS ] || tail -n 5 "$logs/$t$suffix.log" | cut -c1-200 | sed 's/^/    /'
    done
    [ "$n" = 0 ] && check_line "kernels$suffix" "FAILED (no tests)" 0
}
wants kernels && kernel_tests ""

# --- comm: collectives on GPU buffers, checked (every op, dtype and reduction against the CPU
# backends' references) and measured (nccl-tests' columns; busbw is 0 on one rank, whose
# all-reduce is a device copy). CUDA_VISIBLE_DEVICES=0 makes two ranks share one GPU, which NCCL
# refuses, so they stage through pinned host memory over shm; with several GPUs, nccl across
# all of them too. The bench tables go to $OUT/comm.txt. About 40 s.
if wants comm; then
    if [ -x "$bin/test_cuda_comm" ]; then
        run_part test_cuda_comm 150 "${libenv[@]}" OMP_NUM_THREADS=2 "$bin/test_cuda_comm"
        v=$(verdict "$part_rc")
        check_line test_cuda_comm "$v" "$part_s"
        grep -E 'GPU\(s\) visible|rank\(s\), backend|^(ok|FAIL) ' "$logs/test_cuda_comm.log" |
            cut -c1-200 | sed 's/^/    /'
        [ "$v" = PASS ] || tail -n 8 "$logs/test_cuda_comm.log" | cut -c1-200 | sed 's/^/    /'
    else
        check_line test_cuda_comm "FAILED (absent)" 0
    fi
    : >"$out/comm.txt"
    comm_bench() { # NAME CMD...: one sweep, checked; its table appended to comm.txt
        local name=$1
        shift
        run_part "$name" 90 "${libenv[@]}" OMP_NUM_THREADS=2 "$@"
        check_line "$name" "$(verdict "$part_rc")" "$part_s"
        { echo "## $name"; cat "$logs/$name.log"; echo; } >>"$out/comm.txt"
        grep -E '^# (GPU buffers|pinned copies)|^ +[0-9]+ ' "$logs/$name.log" | tail -n 5 |
            cut -c1-200 |
            sed 's/^/    /'
    }
    cargs=(allreduce --device cuda --check --max-bytes 64M --max-ms 1000)
    comm_bench bench_nccl_1rank "$ddpc" bench "${cargs[@]}" --backend nccl
    comm_bench bench_staged_2ranks env CUDA_VISIBLE_DEVICES=0 "$ddpc" run --nproc-per-node 2 \
        --collective-timeout 60 -- "$ddpc" bench "${cargs[@]}"
    # Staging's ceiling from the same run: the sweep's pinned host<->GPU copy line.
    if grep -q '^# pinned copies (' "$logs/bench_staged_2ranks.log" 2>/dev/null; then
        check_line pinned_copy_bandwidth PASS 0
    else
        check_line pinned_copy_bandwidth "FAILED (no line)" 0
    fi
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    if [ "$ngpu" -ge 2 ]; then
        comm_bench "bench_nccl_${ngpu}ranks" "$ddpc" run --nproc-per-node gpu \
            --collective-timeout 60 -- "$ddpc" bench "${cargs[@]}" --backend nccl
    fi
fi

# --- train: the lead's training checks (parity with the CPU, bitwise reruns, resume).
# train_part SUFFIX [VAR=VALUE...]: under that environment, its check named with SUFFIX.
train_part() {
    local suffix=$1
    shift
    if [ -f tests/gpu/train_checks.sh ]; then
        mkdir -p "$work/train$suffix"
        run_part "train_checks$suffix" 240 "${libenv[@]}" "$@" DDPC_BIN="$ddpc" \
            DDPC_SOURCE_DIR="$root" DDPC_GPU_DIR="$gpu" DDPC_SHARDS="$shards" \
            WORK="$work/train$suffix" OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}" \
            bash tests/gpu/train_checks.sh "$ddpc" "$root"
        check_line "train_checks.sh$suffix" "$(verdict "$part_rc")" "$part_s"
        tail -n 25 "$logs/train_checks$suffix.log" | cut -c1-200 | sed 's/^/    /'
    else
        check_line "train_checks.sh$suffix" "SKIPPED (absent)" 0
    fi
}
wants train && train_part ""

# --- candidates: kernels not yet run on a GPU (src/kernels/cuda/candidates.cu), all on at once,
# through the kernel tests and the training checks; ddpc and profile below add their own.
cands=${DDPC_GPU_CANDIDATES-$(grep -rhoE 'ddpc__cuda_candidate\("[a-z0-9_]+"\)' src |
    sed -E 's/.*\("(.*)"\)/\1/' | sort -u | paste -sd, -)}
cand_env=(DDPC_CUDA_CANDIDATES="$cands")
if wants candidates; then
    echo "== candidates: ${cands:-none}"
    if [ -n "$cands" ]; then
        kernel_tests "-cand" "${cand_env[@]}"
        # Tests that print "bits" lines (hashes of their outputs' bits): the same under the
        # candidates as without them, or not (then within the test's bounds, which it checked).
        for f in "$logs"/test_cuda_*-cand.log; do
            [ -f "$f" ] || continue
            t=$(basename "$f" -cand.log)
            [ -f "$logs/$t.log" ] && grep -q ' bits ' "$f" || continue
            if [ "$(grep ' bits ' "$logs/$t.log")" = "$(grep ' bits ' "$f")" ]; then
                check_line "$t bits" "same as default" 0
            else
                check_line "$t bits" "differ (in bounds)" 0
            fi
        done
        # The CPU reference runs are the default part's, where it ran.
        reuse=()
        [ -d "$work/train" ] && reuse=(DDPC_CHECK_CPU_FROM="$work/train")
        train_part "-cand" "${cand_env[@]}" "${reuse[@]}"
    else
        check_line candidates "SKIPPED (none)" 0
    fi
fi
with_cands() { wants candidates && [ -n "$cands" ]; }

# --- multi: several ranks on the GPU (DDP, ZeRO), each tests/gpu/multi_*.sh with train_checks.sh's
# contract (exit 0 PASS, 77 SKIPPED; its own one-line-per-check summary last).
if wants multi; then
    found=no
    for f in tests/gpu/multi_*.sh; do
        [ -f "$f" ] || continue
        found=yes
        name=$(basename "$f" .sh)
        mkdir -p "$work/$name"
        run_part "$name" 150 "${libenv[@]}" DDPC_BIN="$ddpc" DDPC_SOURCE_DIR="$root" \
            DDPC_GPU_DIR="$gpu" WORK="$work/$name" OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" \
            bash "$f" "$ddpc" "$root"
        check_line "$name.sh" "$(verdict "$part_rc")" "$part_s"
        tail -n 20 "$logs/$name.log" | cut -c1-200 | sed 's/^/    /'
    done
    [ $found = yes ] || check_line "multi_*.sh" "SKIPPED (absent)" 0
fi

# --- profile: where one GPT-2 124M step's time goes, kernel-table member by member.
profile_part() { # SUFFIX [VAR=VALUE...]
    local suffix=$1
    shift
    run_part "profile$suffix" 120 "${libenv[@]}" "$@" "$bin/gpu_step_profile" 16
    check_line "gpu_step_profile$suffix" "$(verdict "$part_rc")" "$part_s"
    cp "$logs/profile$suffix.log" "$out/profile$suffix.txt"
    sed 's/^/    /' "$logs/profile$suffix.log" | cut -c1-200
}
if wants profile; then
    profile_part ""
    with_cands && profile_part "-cand" "${cand_env[@]}"
fi

# --- models: `ddpc bench step` against PyTorch eager (bench/torch_step.py --device cuda, the same
# models, SDPA and fused AdamW) on bench/configs' GPT, MLP, CNN and seq2seq (bench/lib.sh's
# pairs) at GPU batch sizes, in fp32,
# TF32 (matmul_precision high / allow_tf32) and bf16 (autocast): median ms per step of 20 after 5,
# each step ending in a synchronisation on both sides; the table into $OUT/models.md.
json_field() { # FIELD FILE: FIELD of the last JSON line of FILE, or nothing
    grep '^{' "$2" 2>/dev/null | tail -n 1 |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1" 2>/dev/null
}
if wants models; then
    md=$out/models.md
    {
        echo "| model | batch | products | ddpc ms/step | PyTorch ms/step | ddpc speed / PyTorch |"
        echo "|---|---|---|---|---|---|"
    } >"$md"
    . bench/lib.sh
    read -ra pairs <<<"$(seq2seq_pairs "$work/pairs")" # seq2seq's data (its config's overrides)
    for m in gpt mlp cnn seq2seq; do
        case $m in gpt) b=64 ;; mlp) b=1024 ;; cnn) b=512 ;; seq2seq) b=256 ;; esac
        extra=()
        [ $m = seq2seq ] && extra=("${pairs[@]}")
        for mode in fp32 tf32 bf16; do
            case $mode in
            fp32) dargs=() pargs=() ;;
            tf32) dargs=(matmul_precision=high) pargs=(--tf32) ;;
            bf16) dargs=(precision=bf16) pargs=(--amp bf16) ;;
            esac
            name=models_${m}_$mode
            run_part "${name}_ddpc" 60 "${libenv[@]}" OMP_NUM_THREADS=8 "$ddpc" \
                bench step "bench/configs/$m.yaml" device=cuda "data.batch_size=$b" \
                bench.steps=20 bench.warmup=5 "${extra[@]}" "${dargs[@]}"
            d=$(json_field median_step_ms "$logs/${name}_ddpc.log")
            run_part "${name}_torch" 90 "$py" bench/torch_step.py "$m" --device cuda --threads 1 \
                --batch "$b" --steps 20 --warmup 5 "${pargs[@]}"
            p=$(json_field median_step_ms "$logs/${name}_torch.log")
            r=""
            ratio='import sys; a, b = map(float, sys.argv[1:]); print("%.2f" % (b / a))'
            [ -n "$d" ] && [ -n "$p" ] && r=$("$py" -c "$ratio" "$d" "$p")
            printf '| %s | %s | %s | %s | %s | %s |\n' "$m" "$b" "$mode" "${d:-FAILED}" \
                "${p:-FAILED}" "${r:-}" >>"$md"
        done
    done
    check_line models "$(grep -q FAILED "$md" && echo "FAILED (a cell)" || echo PASS)" 0
    sed 's/^/    /' "$md"
fi

# --- The benchmark: GPT-2 124M, bf16, batch 16 x 1024, on the same shards.
bench_row() { # KIND NAME FILE-or-WHY [parser options]
    "$py" tests/gpu/bench_parse.py "$@" --tokens-per-step $((B * T)) >>"$rows" ||
        printf '{"name": "%s", "status": "FAILED", "why": "bench_parse.py failed"}\n' "$2" >>"$rows"
}
bench_done() { # NAME LOG: one line per row as it finishes
    local r
    r=$(tail -n 1 "$rows")
    case $r in
    *'"status": "ok"'*) echo "$r" | "$py" -c 'import json,sys; r=json.load(sys.stdin);
print("%-34s %10.0f tok/s %8.1f ms/step" % (r["name"], r["tokens_per_s"], r["ms_per_step"]))' ;;
    *) echo "$1: $(verdict "$part_rc") after ${part_s} s; last lines of its log:"
        tail -n 6 "$2" | cut -c1-200 | sed 's/^/    /' ;;
    esac
}
ddpc_row() { # NAME [VAR=VALUE]: one ddpc benchmark run, its environment extended by VAR=VALUE
    local name=$1 run_dir=$work/$1_run
    shift
    # shellcheck disable=SC2086
    run_part "$name" 180 "${libenv[@]}" "$@" OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}" \
        "$ddpc" train configs/gpt2_124m.yaml ${DDPC_DEVICE_ARGS-device=cuda} \
        "data.train=$train_glob" "data.val=$val_glob" "data.batch_size=$B" \
        "max_steps=$steps" eval_every=0 eval_batches=1 test_batches=1 checkpoint.every_steps=0 \
        optim.grad_accum_steps=1 log_every=5 log.progress=plain log.tensorboard=false \
        "run_dir=$run_dir" ${DDPC_TRAIN_ARGS-}
    cp "$run_dir/metrics.jsonl" "$logs/${name}_metrics.jsonl" 2>/dev/null
    if [ "$part_rc" = 0 ]; then
        bench_row ddpc "$name" "$run_dir/metrics.jsonl" --skip-steps 10
    else
        bench_row failed "$name" "$(verdict "$part_rc"): $(tail -n 1 "$logs/$name.log" | cut -c1-150)"
    fi
    bench_done "$name" "$logs/$name.log"
    # The trainer's own tokens/s against the row's wall clock (docs/observability.md: on a GPU
    # they count the read that waits for the device): within 3%, the logging between windows.
    local vs
    vs=$(tail -n 1 "$rows" |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["trainer_vs_wall"])' 2>/dev/null)
    if [ -n "$vs" ]; then
        if "$py" -c 'import sys; sys.exit(abs(float(sys.argv[1]) - 1) > 0.03)' "$vs"; then
            check_line "$name tokens/s" "PASS (x$vs wall)" 0
        else
            check_line "$name tokens/s" "FAILED (x$vs wall)" 0
        fi
    fi
    # The last window's phases, the host's clock on a GPU (docs/observability.md says where the
    # GPU's time lands among them), and the device's (gpu_phase): printed, not checked.
    "$py" - "$logs/${name}_metrics.jsonl" <<'PY' 2>/dev/null
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ph = [r for r in recs if isinstance(r.get("phase"), dict) and "step_s" in r]
if ph:
    r = ph[-1]
    print("    phases (host clock, ms/step): " + " ".join(
        "%s %.1f" % (k[:-2], 1e3 * v) for k, v in r["phase"].items()) +
        " | step %.1f" % (1e3 * r["step_s"]))
    if isinstance(r.get("gpu_phase"), dict):  # the same window as the device ran it
        print("    gpu_phase (device time, ms/step): " + " ".join(
            "%s %.1f" % (k[:-2], 1e3 * v) for k, v in r["gpu_phase"].items()))
PY
}
# A candidate row's losses against the default row's (the same steps on the same data): the
# default's bits, or within 2% at every logged step (a garbage kernel strays further), so a
# candidate's correctness at GPT-2's shapes is known alone, not only with all of them on.
row_losses() { # NAME: a check line, NAME's logged losses against ddpc's
    local a=$logs/${1}_metrics.jsonl b=$logs/ddpc_metrics.jsonl said
    if [ ! -s "$a" ] || [ ! -s "$b" ]; then
        check_line "$1 losses" "SKIPPED (no metrics)" 0
        return
    fi
    said=$("$py" tests/gpu/losses_close.py "$a" "$b" 0.02 0 2>&1)
    local rc=$? worst
    worst=$(sed -n 's/.*worst relative difference \([^ ]*\) .*/\1/p' <<<"$said" | head -n 1)
    if [ $rc -ne 0 ]; then
        check_line "$1 losses" "FAILED (${worst:-?} > 2%)" 0
        sed 's/^/    /' <<<"$said" | cut -c1-200
    elif [ "$worst" = 0 ]; then
        check_line "$1 losses" "same bits as ddpc" 0
    else
        check_line "$1 losses" "PASS (within $worst)" 0
    fi
}
if wants ddpc; then
    ddpc_row ddpc
    if with_cands; then # each candidate alone, then (when several) all of them together
        for c in ${cands//,/ }; do
            ddpc_row "ddpc-$c" DDPC_CUDA_CANDIDATES="$c"
            row_losses "ddpc-$c"
        done
        if [ "$cands" != "${cands%%,*}" ]; then
            ddpc_row ddpc-cand "${cand_env[@]}"
            row_losses ddpc-cand
        fi
    fi
    # DDPC_BENCH_VARIANT="VAR=VALUE": a second ddpc row under that setting, in the same run.
    [ -n "${DDPC_BENCH_VARIANT:-}" ] && ddpc_row "ddpc-${DDPC_BENCH_VARIANT##*=}" "$DDPC_BENCH_VARIANT"
fi
torch_row() { # MODE LIMIT
    run_part "torch_$1" "$2" "$py" bench/gpu_gpt2_torch.py --mode "$1" --train "$train_glob" \
        --batch $B --block-size $T --warmup $((steps > 20 ? 10 : steps / 2)) \
        --steps $((steps > 20 ? steps - 10 : steps - steps / 2)) --peak-tflops "$peak"
    bench_row torch "pytorch-$1" "$logs/torch_$1.log"
    bench_done "pytorch-$1" "$logs/torch_$1.log"
}
wants eager && torch_row eager 150
if wants llmc; then
    mkdir -p "$work/llmc"
    # -e d12: GPT-2 124M from random weights; no evaluation, sampling or checkpoints in between.
    PART_CWD=$work/llmc run_part llmc 150 "${libenv[@]}" "$bin/train_gpt2cu" -e d12 -b $B \
        -t $T -d $((B * T)) -x "$steps" -i "$train_glob" -j "$val_glob" -l 0.0006 -c 0.1 -u 0 \
        -v 100000 -m 1 -s 0 -n 0
    bench_row llmc llm.c "$logs/llmc.log" --skip-steps 10
    bench_done llm.c "$logs/llmc.log"
fi
# Last, so that inductor's first compile (a minute or two) cannot starve the rows above.
wants compile && torch_row compile 300

# --- The candidates' verdicts from what this run measured: each one's ms/step against the
# default row's, its own losses check, and the checks run with every candidate on (kernel tests,
# train_checks.sh): "promote" (faster, correct), "delete" (slower, or its losses strayed), or
# "look" (the checks with all of them on failed: which one is to blame needs the logs).
verdicts=$work/verdicts.txt # printed after the table, and added to table.md
: >"$verdicts"
if wants ddpc && with_cands; then
    "$py" - "$rows" "$checks" "$cands" >"$verdicts" <<'PY'
import json, re, sys
rows = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    rows[r.get("name")] = r
checks = {}  # check_line's lines: the name in 34 columns, the verdict, seconds
for line in open(sys.argv[2]):
    m = re.match(r"^(.{34}) (.*?)\s+\d+ s$", line.rstrip("\n"))
    if m:
        checks[m.group(1).strip()] = m.group(2).strip()
joint = [v for k, v in checks.items() if k.endswith("-cand")]
joint_ok = bool(joint) and all(v.startswith(("PASS", "SKIPPED")) for v in joint)
base = rows.get("ddpc", {})
for c in sys.argv[3].split(","):
    r = rows.get("ddpc-" + c, {})
    own = checks.get("ddpc-%s losses" % c, "not run")
    if r.get("status") != "ok" or base.get("status") != "ok":
        print("%-8s no timing (its row or the default's FAILED) -> look" % c)
        continue
    ratio = r["ms_per_step"] / base["ms_per_step"]
    if own.startswith("FAILED"):
        verdict = "delete (its losses strayed)"
    elif ratio >= 0.995:
        verdict = "delete (not faster)"
    elif not joint_ok:
        verdict = "look (a check with all candidates on failed)"
    else:
        verdict = "promote"
    print("%-8s %7.1f ms/step vs %.1f (x%.3f)  losses: %-24s -> %s"
          % (c, r["ms_per_step"], base["ms_per_step"], ratio, own, verdict))
PY
fi

# --- Last: the clocks after the work (throttling shows here), the checks' summary, the table.
echo "== after: $(nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader 2>&1 | head -1) (SM MHz, max SM MHz, °C, W)"
if [ -s "$checks" ]; then
    echo "== checks"
    cat "$checks"
fi
if [ -s "$rows" ]; then
    echo "== benchmark on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
        head -1) ($((SECONDS - start)) s in all)"
    "$py" tests/gpu/bench_parse.py table "$rows" --peak-tflops "$peak" | tee "$out/table.md"
fi
if [ -s "$verdicts" ]; then
    echo "== candidates: promote each faster correct one, delete the rest (docs/gpu.md)"
    tee -a "$out/table.md" <"$verdicts"
fi
pack_logs
# Exit 1 when a check or a benchmark row failed, so the device call's rc says it too.
! grep -q FAILED "$checks" "$rows"
