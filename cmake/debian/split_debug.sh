#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cmake/debian/split_debug.sh ROOT OUTDIR VERSION MAINTAINER: what dh_strip and dh_gencontrol do
# for a Debian package, on the tree CPack is about to pack (ROOT, holding usr/...). Each ELF
# executable and shared library gives its debug sections to
# usr/lib/debug/.build-id/xx/yyyy.debug (named by its GNU build-id), is stripped and gets a
# .gnu_debuglink to that file; static libraries lose their debug sections (as dh_strip does, they
# get no debug file). The debug files become OUTDIR/ddpc-dbgsym_VERSION_ARCH.ddeb, built with
# dpkg-deb, with the control fields dh_gencontrol writes (Auto-Built-Package, Build-Ids, Depends on
# this very version) and, as Debian's dbgsym packages have, /usr/share/doc/ddpc-dbgsym as a link to
# /usr/share/doc/ddpc, whose copyright and changelog cover it. Run by cmake/deb_dbgsym.cmake.
set -euo pipefail
if [ $# -ne 4 ]; then
    echo "usage: $0 ROOT OUTDIR VERSION MAINTAINER" >&2
    exit 2
fi
root=$1
outdir=$2
version=$3
maintainer=$4
arch=$(dpkg --print-architecture)
dbg=$(mktemp -d)
trap 'rm -rf "$dbg"' EXIT

# elf_type FILE: EXEC, DYN or REL for an ELF file, nothing for anything else.
elf_type() {
    [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ] || return 0
    LC_ALL=C readelf -h "$1" | sed -n 's/^ *Type: *\([A-Z]*\) .*/\1/p'
}
build_id() {
    LC_ALL=C readelf -n "$1" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p'
}

ids=()
while IFS= read -r -d '' f; do
    case $(elf_type "$f") in
        EXEC | DYN) ;;
        *) continue ;;
    esac
    id=$(build_id "$f")
    if [ ${#id} -lt 3 ]; then
        echo "split_debug.sh: ${f#"$root"} has no GNU build-id (link with --build-id)" >&2
        exit 1
    fi
    mkdir -p "$dbg/usr/lib/debug/.build-id/${id:0:2}"
    out="$dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
    objcopy --only-keep-debug --compress-debug-sections "$f" "$out"
    chmod 0644 "$out"
    # dh_strip's choices: shared libraries keep the symbols their users link against
    # (--strip-unneeded); executables keep none.
    case $f in
        *.so | *.so.*) strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f" ;;
        *) strip --remove-section=.comment --remove-section=.note "$f" ;;
    esac
    objcopy --add-gnu-debuglink="$out" "$f"
    ids+=("$id")
done < <(find "$root" -type f -print0 | sort -z)
while IFS= read -r -d '' f; do
    strip --strip-debug --remove-section=.comment --remove-section=.note \
        --enable-deterministic-archives "$f"
done < <(find "$root" -type f -name 'lib*.a' -print0)

if [ ${#ids[@]} -eq 0 ]; then
    echo "split_debug.sh: no ELF executable or shared library under $root" >&2
    exit 1
fi
mkdir -p "$dbg/usr/share/doc" "$dbg/DEBIAN"
ln -s ddpc "$dbg/usr/share/doc/ddpc-dbgsym"
(cd "$dbg" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$dbg/DEBIAN/md5sums"
cat >"$dbg/DEBIAN/control" <<EOF
Package: ddpc-dbgsym
Source: ddpc
Version: $version
Auto-Built-Package: debug-symbols
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$dbg" | cut -f1)
Depends: ddpc (= $version)
Section: debug
Priority: optional
Description: debug symbols for ddpc
Build-Ids: ${ids[*]}
EOF
chmod -R u=rwX,go=rX "$dbg"
mkdir -p "$outdir"
dpkg-deb --root-owner-group -Zxz -b "$dbg" "$outdir/ddpc-dbgsym_${version}_$arch.ddeb" >/dev/null
