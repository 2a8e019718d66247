#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deploy/fresh-debian.sh WORKDIR: deploy/Dockerfile's stages without a container runtime, each in
# a fresh Debian 12 root made by debootstrap (minbase, like the debian:12 image):
#   1. build:   the source tree copied in, then README.md's ./scripts/setup and make deb;
#   2. runtime: an untouched root, README.md's
#               apt-get update && apt-get install -y ./build-deb/ddpc_*.deb, then ddpc --version and
#               200 steps of ddpc train on an installed config;
#   3. example: gcc, make, pkg-config and cmake only (none of ddpc's -dev dependencies), then
#               examples/embed from /usr/share/doc/ddpc built through pkg-config and
#               find_package, and run (the loss must fall).
# Needs root, debootstrap and the network to deb.debian.org (about 1.5 GB and 10 minutes); not
# part of `make test`. WORKDIR (created, must not exist) keeps both roots for inspection.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib/debian_root.sh"
debian_root_start "$0" "$@"

# in_root ROOT COMMAND: runs COMMAND under bash in ROOT with /proc and /dev (a failure exits
# the script, and the EXIT trap unmounts).
in_root() {
    debian_root_mount "$1"
    cp /etc/resolv.conf "$1/etc/resolv.conf"
    chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        DEBIAN_FRONTEND=noninteractive /bin/bash -euo pipefail -c "$2"
    debian_root_unmount_all
}

echo "== debootstrap bookworm (minbase) into $work/build"
debootstrap --variant=minbase bookworm "$work/build" "$mirror" >"$work/debootstrap.log"
cp -a "$work/build" "$work/runtime"

echo "== 1. build: ./scripts/setup && make deb"
mkdir "$work/build/src"
git -C "$src" ls-files -co --exclude-standard | tar -C "$src" -cf - -T - |
    tar -C "$work/build/src" -xf -
in_root "$work/build" 'cd /src && ./scripts/setup && make deb'

echo "== 2. runtime: apt-get install the package in an untouched root, then ddpc train"
mkdir -p "$work/runtime/src/build-deb"
cp "$work"/build/src/build-deb/ddpc_*.deb "$work/runtime/src/build-deb/"
in_root "$work/runtime" 'cd /src && apt-get update && apt-get install -y ./build-deb/ddpc_*.deb
    ddpc --version
    cd /tmp && ddpc train /usr/share/ddpc/configs/fmnist_mlp.yaml max_steps=200 log_every=100 \
        run_dir=/tmp/run
    grep "\"split\": \"test\"" /tmp/run/metrics.jsonl'

echo "== 3. example: examples/embed against /usr with only a compiler, pkg-config and cmake"
in_root "$work/runtime" 'apt-get install -y --no-install-recommends \
        gcc libc6-dev make pkg-config cmake
    cp -r /usr/share/doc/ddpc/examples/embed /tmp/embed && cd /tmp/embed
    make && ldd ./train_mlp | grep libddpc.so.0 && ./train_mlp
    cmake -S . -B build && cmake --build build && ./build/train_mlp synthetic'
echo "== fresh-debian.sh: all three stages passed"
