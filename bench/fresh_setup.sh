#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/fresh_setup.sh WORKDIR: times README.md's first command on a fresh Debian 12, as a new user
# meets it, twice, each in its own untouched `debootstrap --variant=minbase bookworm` root (the
# debian:12 image's package set and apt sources):
#   default: README's set-up line (`./scripts/setup && make demo`), which installs the build's
#            and the demo's packages only;
#   test:    `./scripts/setup --test` first (the tests' packages too, what `make demo` installed
#            before the two lists were split), then the same line.
# For each step it prints the wall time, the packages dpkg gained, and what apt downloaded (the
# .debs left in /var/cache/apt/archives); bench/fresh_setup.md records a run. The source is a clean
# `git clone` of this tree's HEAD, so uncommitted changes are not measured.
# Needs root, debootstrap and the network to deb.debian.org (about 2 GB of downloads and 12 GB of
# disk at the peak); not part of `make test`. Each root is removed once measured unless KEEP=1.
# Environment: DEBIAN_MIRROR (http://deb.debian.org/debian), VARIANTS ("default test"), BASE (a
# root made by `debootstrap --variant=minbase bookworm` earlier, copied instead of a new one).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib/debian_root.sh"
debian_root_start "$0" "$@"
variants=${VARIANTS:-default test}

# step ROOT LOG COMMAND: runs COMMAND under bash in ROOT (as root, in /root/ddpc) with /proc,
# /sys and /dev, keeps its output in WORKDIR/VARIANT-LOG.log (each line prefixed with the seconds
# since the step began), and prints one line: the command, its exit status, wall time, load
# average before and after, packages gained and the size of the .debs apt downloaded.
step() {
    local root=$1 cmd=$3 log="$work/$variant-$2.log" pk0 pk1 dl0 dl1 t0 t1 rc load0
    pk0=$(chroot "$root" dpkg-query -W | wc -l)
    dl0=$(du -sk "$root/var/cache/apt/archives" | cut -f1)
    load0=$(cut -d' ' -f1 /proc/loadavg)
    debian_root_mount "$root" sys
    t0=$(date +%s.%N)
    set +e
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
        /bin/bash -c "cd /root/ddpc && $cmd" 2>&1 |
        { SECONDS=0; while IFS= read -r line; do printf '%5d %s\n' "$SECONDS" "$line"; done; } \
            >"$log"
    rc=${PIPESTATUS[0]}
    set -e
    t1=$(date +%s.%N)
    debian_root_unmount_all
    pk1=$(chroot "$root" dpkg-query -W | wc -l)
    dl1=$(du -sk "$root/var/cache/apt/archives" | cut -f1)
    printf '%-8s %-34s exit %d  %7.1f s  load %s -> %s  +%d packages  %d MB downloaded\n' \
        "$variant" "$cmd" "$rc" "$(awk "BEGIN{print $t1 - $t0}")" "$load0" \
        "$(cut -d' ' -f1 /proc/loadavg)" $((pk1 - pk0)) $(((dl1 - dl0) / 1024)) |
        tee -a "$work/summary.txt"
    return "$rc"
}

echo "== $(date -u '+%F %T') UTC, $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo |
    cut -d: -f2 | sed 's/^ //')), source $(git -C "$src" rev-parse --short HEAD)" |
    tee "$work/summary.txt"
git clone -q --no-local "$src" "$work/src"
if [ -n "${BASE:-}" ]; then
    echo "== a copy of $BASE"
    cp -a "$BASE" "$work/base"
else
    echo "== debootstrap --variant=minbase bookworm"
    debootstrap --variant=minbase bookworm "$work/base" "$mirror" >"$work/debootstrap.log"
fi
# The apt sources of the debian:12 image (the release, its updates and security), and apt's
# archive cache kept (minbase keeps it) so the downloads can be counted.
cat >"$work/base/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$work/base/etc/resolv.conf"

for variant in $variants; do
    root="$work/$variant"
    cp -a "$work/base" "$root"
    cp -a "$work/src" "$root/root/ddpc"
    if [ "$variant" = test ]; then
        step "$root" setup-test "./scripts/setup --test"
    fi
    step "$root" demo "./scripts/setup && make demo"
    grep -E '"split": "(test|eval)"|epoch 1' "$root/root/ddpc/runs/demo/metrics.jsonl" |
        tail -1 >"$work/$variant-demo-result.txt" || true
    [ "${KEEP:-0}" = 1 ] || rm -rf "$root"
done
[ "${KEEP:-0}" = 1 ] || rm -rf "$work/base" "$work/src"
echo "== done; logs in $work"
