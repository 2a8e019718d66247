#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/setup's two package lists (--list: the build, `make deb` and the demo; --list --test:
# that and what the tests need) against what uses each package: every package listed is in the
# table below, which names a file the package provides (dpkg -S must agree) and a file of ours
# that uses it (which must still mention it); the build's packages are in the default list, the
# tests' only in the --test one; and `make test`, having run scripts/setup --test, has them all.
# usage: cli_setup.sh DDPC_BIN SOURCE_DIR
set -u
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
setup=$src/scripts/setup
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)

# package | list (build or test) | a file it provides | our file that uses it | what that file says
table="\
build-essential|build|/usr/share/build-essential|README.md|make
cmake|build|/usr/bin/cmake|Makefile|cmake -S
pkg-config|build|/usr/share/doc/pkg-config|tests/deb/test_deb.sh|pkg-config
dpkg-dev|build|/usr/bin/dpkg-shlibdeps|cmake/package.cmake|SHLIBDEPS ON
file|build|/usr/bin/file|docs/install.md|\`file\`
help2man|build|/usr/bin/help2man|cmake/man.cmake|help2man
libopenblas-openmp-dev|build|/usr/include/$multiarch/openblas-openmp/cblas.h|CMakeLists.txt|openblas-openmp
libyaml-dev|build|/usr/include/yaml.h|CMakeLists.txt|yaml.h
zlib1g-dev|build|/usr/include/zlib.h|CMakeLists.txt|ZLIB
libdnnl-dev|build|/usr/include/oneapi/dnnl/dnnl.h|CMakeLists.txt|oneapi/dnnl/dnnl.h
libssl-dev|build|/usr/include/openssl/hmac.h|CMakeLists.txt|OpenSSL
libpng-dev|build|/usr/include/png.h|CMakeLists.txt|find_package(PNG REQUIRED)
libjpeg62-turbo-dev|build|/usr/include/jpeglib.h|CMakeLists.txt|find_package(JPEG REQUIRED)
libopenmpi-dev|build|/usr/lib/$multiarch/openmpi/include/mpi.h|CMakeLists.txt|find_package(MPI
openmpi-bin|build|/usr/bin/orterun|docs/launcher.md|mpirun
libgloo-dev|build|/usr/include/gloo/transport/tcp/device.h|CMakeLists.txt|gloo/transport/tcp/device.h
dataset-fashion-mnist|build|/usr/share/datasets/fashion-mnist|src/train/trainer_impl.h|/usr/share/datasets/fashion-mnist
fortunes|test|/usr/share/games/fortunes/art|configs/gpt_fortunes.yaml|/usr/share/games/fortunes
dict-freedict-eng-deu|test|/usr/share/dictd/freedict-eng-deu.dict.dz|scripts/freedict_pairs.py|freedict-eng-deu
python3-torch|test|/usr/lib/python3/dist-packages/torch/__init__.py|tests/parity/parity.py|import torch
python3-numpy|test|/usr/lib/python3/dist-packages/numpy/__init__.py|tests/cli_train_npy.sh|import numpy
iproute2|test|/bin/ip|tests/multihost/testbed.sh|ip netns
iputils-ping|test|/bin/ping|tests/multihost/testbed.sh|ping -c1
util-linux|test|/usr/bin/unshare|tests/cli_train_task_shard.sh|unshare
time|test|/usr/bin/time|tests/cli_translate_inputs.sh|/usr/bin/time
slurm-wlm|test|/usr/share/doc/slurm-wlm|tests/cli_slurm.sh|slurm-wlm
munge|test|/usr/sbin/munged|scripts/slurm-cluster|munged
libpmix-dev|test|/usr/share/doc/libpmix-dev|tests/cli_slurm.sh|--mpi=pmix
chromium|test|/usr/bin/chromium|tests/cli_report.sh|chromium --headless
protobuf-compiler|test|/usr/bin/protoc|tests/cli_train_tb.sh|protoc
python3-protobuf|test|/usr/lib/python3/dist-packages/google/protobuf/__init__.py|tests/cli_train_tb.sh|google.protobuf
python3-crcmod|test|/usr/lib/python3/dist-packages/crcmod/__init__.py|tests/tb/decode_events.py|import crcmod
clang|test|/usr/bin/clang|tests/fuzz/run.sh|-fsanitize=fuzzer
libclang-rt-dev|test|/usr/share/doc/libclang-rt-dev|tests/fuzz/run.sh|-fsanitize=fuzzer
libomp-dev|test|/usr/share/doc/libomp-dev|tests/fuzz/run.sh|-fopenmp
lintian|test|/usr/bin/lintian|tests/deb/test_deb.sh|lintian --fail-on error
man-db|test|/usr/bin/man|tests/deb/check_contents.sh|man -l
gdb|test|/usr/bin/gdb|tests/deb/test_deb.sh|gdb -nx -batch"

"$setup" --list >"$tmp/build" 2>"$tmp/err1"
check_status "scripts/setup --list" $? "$tmp/err1"
"$setup" --test --list >"$tmp/all" 2>"$tmp/err2"
check_status "scripts/setup --test --list" $? "$tmp/err2"
check "the default list is part of the --test list" \
    test -z "$(comm -23 <(sort "$tmp/build") <(sort "$tmp/all"))"
while IFS='|' read -r pkg list provides user says; do
    echo "$pkg" >>"$tmp/table"
    if [ "$list" = build ]; then
        check "$pkg: in the default list" grep -qx -- "$pkg" "$tmp/build"
    else
        check "$pkg: in --test only" \
            bash -c "grep -qx -- '$pkg' '$tmp/all' && ! grep -qx -- '$pkg' '$tmp/build'"
    fi
    check "$pkg: provides $provides (dpkg -S)" \
        bash -c "dpkg -S '$provides' 2>/dev/null | grep -Eq '^$pkg(:[a-z0-9]+)?: '"
    check "$pkg: $user uses it ('$says')" grep -qF -- "$says" "$src/$user"
done <<<"$table"
check "every package listed has its row here" \
    test -z "$(comm -23 <(sort "$tmp/all") <(sort "$tmp/table"))"

"$setup" --frobnicate >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
check "an unknown argument: exit 2 and one line naming it" \
    bash -c "[ $rc -eq 2 ] && [ ! -s '$tmp/bad.out' ] && [ \$(wc -l <'$tmp/bad.err') -eq 1 ] &&
             grep -q \"unknown argument '--frobnicate'\" '$tmp/bad.err'"
check "make test runs scripts/setup --test" \
    bash -c "grep -A1 '^setup-test:' '$src/Makefile' | grep -q 'scripts/setup --test' &&
             grep -q '^test: setup-test' '$src/Makefile'"
# A fresh Debian 12 (debian:12, debootstrap minbase) has no make: README's first command
# installs it (build-essential) before it runs make (bench/fresh_setup.md).
first=$(awk '/^## Set-up/ {s = 1} s && /^```sh/ {getline; print; exit}' "$src/README.md")
check "README's first command is ./scripts/setup && make demo" \
    bash -c "[[ '${first%%#*}' =~ ^\./scripts/setup\ \&\&\ make\ demo\ *$ ]]"
check "make demo builds the program only" \
    bash -c "grep -A2 '^demo:' '$src/Makefile' | grep -q -- '--target ddpc\$'"
check "make demo runs scripts/setup without --test" \
    bash -c "grep -A1 '^setup:' '$src/Makefile' | grep -qx '.@./scripts/setup' &&
             grep -q '^demo: setup ' '$src/Makefile'"
summary
