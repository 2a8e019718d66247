#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make deb`'s package, built with the build directory's CPack configuration into a scratch
# directory (no root needed): its control fields and files, and the -dbgsym .ddeb beside it
# (tests/deb/check_contents.sh). Installing
# it is `make test-deb`'s job (tests/deb/test_deb.sh, root). In a build with CUDA: cpack's
# refusal.
# usage: cli_deb.sh DDPC_BIN SOURCE_DIR   (the build directory is DDPC_BIN's)
set -u
ddpc=$1
src=$2
build=$(cd "$(dirname "$ddpc")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
. "$(dirname "${BASH_SOURCE[0]}")/deb/check_contents.sh"

# A build with CUDA makes no package (cmake/package.cmake): cpack stops with one line, and the
# package's contents are checked by `make test-deb`, whose build leaves CUDA out.
if ! "$ddpc" env 2>/dev/null | grep -Eq '^  CUDA runtime: +none'; then
    cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1
    rc=$?
    want="ddpc's .deb is built without CUDA: configure a build directory with" # CMake wraps it
    if [ $rc -ne 0 ] && grep -qF "$want" "$tmp/cpack.log" &&
        ! ls "$tmp"/pkg/ddpc_*.deb >/dev/null 2>&1; then
        ok "a build with CUDA makes no .deb and says why"
    else
        fail "a build with CUDA makes no .deb and says why (exit $rc)" "$tmp/cpack.log"
    fi
    echo "note: this build has CUDA; make test-deb checks the package, built without it"
    summary
    exit
fi
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1
check_status "cpack -G DEB builds the package" $? "$tmp/cpack.log"
deb=$(ls "$tmp"/pkg/ddpc_*.deb 2>/dev/null | head -1)
check "it is named ddpc_VERSION_ARCH.deb" test -n "$deb"
# The libraries' directory is this build's (make deb's, installed under /usr, is lib/<triplet>).
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$deb" ] && deb_contents "$deb" "$src" "$libdir" && deb_man_pages "$deb" "$ddpc"
ddeb=$(ls "$tmp"/pkg/ddpc-dbgsym_*.ddeb 2>/dev/null | head -1)
check "cpack made the -dbgsym .ddeb beside it" test -n "$ddeb"
[ -n "$deb" ] && [ -n "$ddeb" ] && deb_dbgsym "$deb" "$ddeb" "$src" "$libdir"
summary
