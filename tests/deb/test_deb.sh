#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make test-deb` (root): installs build-deb/ddpc_*.deb (a build without CUDA) with apt, which
# resolves its Depends, the way a user on Debian 12 would; checks the files
# (tests/deb/check_contents.sh) and the installed system: examples/embed built out of tree
# against /usr through pkg-config (shared and static) and find_package, running with the
# libddpc.so.0 that ldconfig finds (under /usr/lib/<triplet>), /usr/bin/ddpc training a config
# from /usr/share/ddpc/configs, lintian (no errors) and the man pages (man -l); then purges the
# package (also on failure) and checks nothing of it is left. Refuses to run over an already
# installed ddpc.
# usage: test_deb.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/../lib/check.sh"
. "$here/check_contents.sh"
export OMP_NUM_THREADS=1

if [ "$(id -u)" -ne 0 ]; then
    echo "test_deb.sh: needs root (it installs the package with apt-get)" >&2
    exit 2
fi
if dpkg-query -W -f='${Status}' ddpc 2>/dev/null | grep -q "install ok installed"; then
    echo "test_deb.sh: a ddpc package is already installed; remove it first (apt-get purge ddpc)" \
        >&2
    exit 2
fi
debs=("$build"/ddpc_*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
    echo "test_deb.sh: expected one $build/ddpc_*.deb (make deb), found ${#debs[@]}" >&2
    exit 2
fi
deb=$(cd "$(dirname "${debs[0]}")" && pwd)/$(basename "${debs[0]}")
version=$(dpkg-deb -f "$deb" Version)

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=lib/$multiarch
deb_contents "$deb" "$src" "$libdir"

# lintian, as Debian's archive runs it: errors fail (warnings are listed, docs/install.md says
# which remain and why).
lintian --tag-display-limit 0 "$deb" >"$tmp/lintian.log" 2>&1
grep -v '^running with root privileges' "$tmp/lintian.log" | sed 's/^/    lintian: /'
check "lintian reports no errors on $(basename "$deb")" bash -c "! grep -q '^E: ' '$tmp/lintian.log'"

remove() { apt-get purge -y -qq ddpc >"$tmp/remove.log" 2>&1; }
trap 'remove; rm -rf "$tmp"' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$tmp/apt.log" 2>&1
check_status "apt-get install ./$(basename "$deb")" $? "$tmp/apt.log"
check "dpkg says ddpc $version is installed" \
    test "$(dpkg-query -W -f='${Status} ${Version}' ddpc)" = "install ok installed $version"
check "ldconfig knows libddpc.so.0" bash -c "ldconfig -p | grep -q 'libddpc.so.0 '"
check "pkg-config finds ddpc ${version%-*}" test "$(pkg-config --modversion ddpc)" = "${version%-*}"

# train NAME BINARY: the example on Fashion-MNIST; its loss must fall.
train() {
    "$2" /usr/share/datasets/fashion-mnist 300 >"$tmp/$1.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q "^mean loss: .*: decreasing$" "$tmp/$1.log" &&
        grep -q "library ${version%-*}$" "$tmp/$1.log"; then
        ok "$1: trains ($(grep '^mean loss' "$tmp/$1.log"))"
    else
        fail "$1: trains (exit $rc)" "$tmp/$1.log"
    fi
}
cp -r /usr/share/doc/ddpc/examples/embed "$tmp/pc"
make -C "$tmp/pc" >"$tmp/pc.log" 2>&1
check_status "make (pkg-config ddpc) builds the installed example" $? "$tmp/pc.log"
check "it runs with the installed libddpc.so.0" \
    bash -c "ldd '$tmp/pc/train_mlp' | grep -Eq 'libddpc.so.0 => (/usr)?/$libdir/libddpc.so.0'"
train pkg-config-shared "$tmp/pc/train_mlp"
cp -r /usr/share/doc/ddpc/examples/embed "$tmp/pcs"
make -C "$tmp/pcs" PKG=ddpc-static >"$tmp/pcs.log" 2>&1
check_status "make PKG=ddpc-static builds it" $? "$tmp/pcs.log"
train pkg-config-static "$tmp/pcs/train_mlp"
cmake -S /usr/share/doc/ddpc/examples/embed -B "$tmp/cm" >"$tmp/cm.log" 2>&1 &&
    cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1
check_status "find_package(ddpc) finds /usr and builds it" $? "$tmp/cm.log"
train find-package "$tmp/cm/train_mlp"

check "/usr/bin/ddpc --version" test "$(/usr/bin/ddpc --version)" = "ddpc ${version%-*}"
deb_man_pages "$deb" /usr/bin/ddpc
(cd "$tmp" && /usr/bin/ddpc train /usr/share/ddpc/configs/fmnist_mlp.yaml max_steps=20 \
    log_every=10 num_threads=1 run_dir="$tmp/run") >"$tmp/train.log" 2>&1
check "/usr/bin/ddpc trains /usr/share/ddpc/configs/fmnist_mlp.yaml" \
    grep -q '"step": 20, "epoch"' "$tmp/run/metrics.jsonl"

remove
check_status "apt-get purge ddpc" $? "$tmp/remove.log"
check "nothing of the package is left" \
    test ! -e /usr/bin/ddpc -a ! -e "/usr/$libdir/libddpc.so.0" -a ! -e /usr/include/ddpc
check "ldconfig forgot libddpc.so.0" bash -c "! ldconfig -p | grep -q 'libddpc.so.0 '"
summary
