#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make test-deb` (root): installs build-deb/ddpc_*.deb (a build without CUDA) with apt, which
# resolves its Depends, the way a user on Debian 12 would; checks the files
# (tests/deb/check_contents.sh) and the installed system: examples/embed built out of tree
# against /usr through pkg-config (shared and static) and find_package, running with the
# libddpc.so.0 that ldconfig finds (under /usr/lib/<triplet>), /usr/bin/ddpc training a config
# from /usr/share/ddpc/configs, lintian (no errors, on the package and on its -dbgsym .ddeb) and
# the man pages (man -l); installs the .ddeb beside it and checks that gdb finds the program's and
# the library's functions and source lines through their build-ids; then purges both packages
# (also on failure) and checks nothing of them is left. Refuses to run over an already installed
# ddpc.
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
ddeb=$(dirname "$deb")/ddpc-dbgsym_${version}_$(dpkg --print-architecture).ddeb
if [ ! -f "$ddeb" ]; then
    echo "test_deb.sh: no $ddeb beside the .deb (make deb makes both)" >&2
    exit 2
fi

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=lib/$multiarch
deb_contents "$deb" "$src" "$libdir"
deb_dbgsym "$deb" "$ddeb" "$src" "$libdir"

# lintian, as Debian's archive runs it: errors fail (warnings are listed, docs/install.md says
# which remain and why). Both packages in one run, as one upload's: the .ddeb's doc directory is
# a link to ddpc's, which lintian accepts when it sees both come from the same source.
lintian --fail-on error --tag-display-limit 0 "$deb" "$ddeb" >"$tmp/lintian.log" 2>&1
rc=$?
grep -v '^running with root privileges' "$tmp/lintian.log" | sed 's/^/    lintian: /'
check "lintian exits 0 (it ran, and found no errors) on both packages" test $rc -eq 0
check "lintian reports no errors on $(basename "$deb")" \
    bash -c "! grep -q '^E: ddpc: ' '$tmp/lintian.log'"
check "lintian reports no errors on $(basename "$ddeb")" \
    bash -c "! grep -q '^E: ddpc-dbgsym: ' '$tmp/lintian.log'"

remove() { apt-get purge -y -qq ddpc-dbgsym ddpc >"$tmp/remove.log" 2>&1; }
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

# The debug symbols: the stripped program and library have no source lines; once apt has
# installed the .ddeb (as a .deb: apt takes packages by that name), gdb finds them through the
# build-id (gdb -batch does not print which file it read; the line is the proof).
gdb_line() { gdb -nx -batch -ex 'info line ddpc_pg_all_reduce' "$1" >"$2" 2>&1; }
has_line() { grep -Eq '^Line [0-9]+ of "(\./)?src/comm/pg_coll\.c"' "$1"; }
for f in /usr/bin/ddpc /usr/$libdir/libddpc.so.0; do
    gdb_line "$f" "$tmp/gdb0.log"
    name="gdb $f without the -dbgsym package: no source line for ddpc_pg_all_reduce"
    if grep -q ddpc_pg_all_reduce "$tmp/gdb0.log" && ! has_line "$tmp/gdb0.log"; then
        ok "$name"
    else
        fail "$name" "$tmp/gdb0.log"
    fi
done
cp "$ddeb" "$tmp/ddpc-dbgsym.deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tmp/ddpc-dbgsym.deb" >"$tmp/apt-dbg.log" 2>&1
check_status "apt-get install ./$(basename "$ddeb")" $? "$tmp/apt-dbg.log"
for f in /usr/bin/ddpc /usr/$libdir/libddpc.so.0; do
    gdb_line "$f" "$tmp/gdb.log"
    name="gdb $f with it: ddpc_pg_all_reduce's source line, src/comm/pg_coll.c"
    if has_line "$tmp/gdb.log"; then ok "$name"; else fail "$name" "$tmp/gdb.log"; fi
done

remove
check_status "apt-get purge ddpc" $? "$tmp/remove.log"
check "nothing of the packages is left" \
    test ! -e /usr/bin/ddpc -a ! -e "/usr/$libdir/libddpc.so.0" -a ! -e /usr/include/ddpc \
        -a ! -e /usr/share/doc/ddpc-dbgsym
check "ldconfig forgot libddpc.so.0" bash -c "! ldconfig -p | grep -q 'libddpc.so.0 '"
summary
