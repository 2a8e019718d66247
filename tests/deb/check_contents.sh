#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sourced by tests/cli_deb.sh and tests/deb/test_deb.sh after tests/lib/check.sh:
#     deb_contents DEB SOURCE_DIR LIBDIR
# checks the package's control fields (name, version from include/ddpc/version.h with the Debian
# revision of cmake/debian/changelog, the runtime libraries in Depends), that `dpkg -c` lists
# everything `cmake --install` puts in place, the libraries under /usr/LIBDIR (make deb's:
# lib/<multiarch triplet>), Debian's copyright (DEP-5) and changelog.Debian.gz, and stripped
# binaries.
#     deb_dbgsym DEB DDEB SOURCE_DIR LIBDIR
# checks the -dbgsym package beside it (cmake/debian/split_debug.sh): dh_gencontrol's control
# fields, md5sums with relative paths that match, the doc directory linked to ddpc's, and for
# the program and the shared library a debug file under /usr/lib/debug/.build-id named by their
# build-id, with that build-id, their symbols, and the CRC their .gnu_debuglink records.
#     deb_man_pages DEB DDPC_BIN
# checks that the package has a man page for ddpc and for each command `ddpc --help` lists, each
# one `man -l` formats with its NAME.

deb_contents() {
    local deb=$1 src=$2 libdir=$3 version debversion f
    version=$(awk '/^#define DDPC_VERSION_(MAJOR|MINOR|PATCH) /{v = v s $3; s = "."} END{print v}' \
        "$src/include/ddpc/version.h")
    debversion=$(dpkg-parsechangelog -l "$src/cmake/debian/changelog" -S Version)
    check "deb: cmake/debian/changelog's newest entry is for $version" \
        test "${debversion%-*}" = "$version"
    dpkg-deb -f "$deb" Package Version Depends Recommends Suggests >"$tmp/control" 2>&1
    check "deb: package ddpc" grep -qx "Package: ddpc" "$tmp/control"
    check "deb: version $debversion" grep -qx "Version: $debversion" "$tmp/control"
    for f in libopenblas0-openmp libyaml-0-2 zlib1g libdnnl2 libgomp1 libc6; do
        check "deb: Depends names $f" grep -Eq "^Depends: (.*, )?$f( |,|$)" "$tmp/control"
    done
    check "deb: Recommends the configs' data" \
        grep -qx "Recommends: dataset-fashion-mnist, fortunes" "$tmp/control"
    check "deb: Suggests the -dev packages a static link needs" \
        grep -Eq "^Suggests: .*libopenblas-openmp-dev.*libopenmpi-dev" "$tmp/control"
    dpkg-deb -I "$deb" shlibs >"$tmp/shlibs" 2>&1
    check "deb: a shlibs file for libddpc.so.0" \
        grep -qx "libddpc 0 ddpc (>= $debversion)" "$tmp/shlibs"
    dpkg-deb -I "$deb" triggers >"$tmp/ldconfig" 2>&1
    check "deb: an ldconfig trigger" grep -qx "activate-noawait ldconfig" "$tmp/ldconfig"
    dpkg -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/files"
    local l=/usr/$libdir
    for f in /usr/bin/ddpc $l/libddpc.a $l/libddpc.so $l/libddpc.so.0 "$l/libddpc.so.$version" \
        $l/pkgconfig/ddpc.pc $l/pkgconfig/ddpc-static.pc \
        $l/cmake/ddpc/ddpcConfig.cmake $l/cmake/ddpc/ddpcConfigVersion.cmake \
        $l/cmake/ddpc/ddpcSharedTargets.cmake $l/cmake/ddpc/ddpcStaticTargets.cmake \
        /usr/share/doc/ddpc/README.md /usr/share/doc/ddpc/config.md \
        /usr/share/doc/ddpc/copyright /usr/share/doc/ddpc/changelog.Debian.gz \
        /usr/share/doc/ddpc/examples/embed/train_mlp.c /usr/share/ddpc/configs/fmnist_mlp.yaml; do
        check "deb: dpkg -c lists $f" grep -qx -- "$f" "$tmp/files"
    done
    local missing=0
    for f in "$src"/include/ddpc/*.h; do
        grep -qx "/usr/include/ddpc/$(basename "$f")" "$tmp/files" || {
            echo "    missing /usr/include/ddpc/$(basename "$f")"
            missing=1
        }
    done
    check "deb: dpkg -c lists every public header" test $missing -eq 0

    rm -rf "$tmp/x"
    dpkg-deb -x "$deb" "$tmp/x"
    check "deb: the copyright file is DEP-5, MIT, The ddpc authors" bash -c \
        "head -1 '$tmp/x/usr/share/doc/ddpc/copyright' |
             grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' &&
         grep -qx 'License: MIT' '$tmp/x/usr/share/doc/ddpc/copyright' &&
         grep -qx 'Copyright: 2026 The ddpc authors' '$tmp/x/usr/share/doc/ddpc/copyright'"
    check "deb: changelog.Debian.gz's newest entry is $debversion" bash -c \
        "zcat '$tmp/x/usr/share/doc/ddpc/changelog.Debian.gz' | head -1 | grep -q '^ddpc ($debversion) '"
    check "deb: ddpc and libddpc.so are stripped" bash -c \
        "file -L '$tmp/x/usr/bin/ddpc' '$tmp/x$l/libddpc.so.$version' | grep -c ', stripped$' |
             grep -qx 2"
}

deb_dbgsym() {
    local deb=$1 ddeb=$2 src=$3 libdir=$4 debversion arch f id ids=() dbg
    debversion=$(dpkg-parsechangelog -l "$src/cmake/debian/changelog" -S Version)
    arch=$(dpkg --print-architecture)
    check "ddeb: named ddpc-dbgsym_${debversion}_$arch.ddeb" \
        test "$(basename "$ddeb")" = "ddpc-dbgsym_${debversion}_$arch.ddeb" -a -f "$ddeb"
    dpkg-deb -f "$ddeb" >"$tmp/dcontrol" 2>&1
    for f in "Package: ddpc-dbgsym" "Source: ddpc" "Version: $debversion" \
        "Auto-Built-Package: debug-symbols" "Architecture: $arch" "Depends: ddpc (= $debversion)" \
        "Section: debug" "Priority: optional" "Description: debug symbols for ddpc"; do
        check "ddeb: control has '$f'" grep -qxF -- "$f" "$tmp/dcontrol"
    done
    rm -rf "$tmp/xd" "$tmp/xdeb"
    dpkg-deb -x "$ddeb" "$tmp/xd"
    dpkg-deb -x "$deb" "$tmp/xdeb"
    dpkg-deb -I "$ddeb" md5sums >"$tmp/dmd5" 2>&1
    check "ddeb: md5sums has relative paths, and they match" bash -c \
        "[ -s '$tmp/dmd5' ] && ! grep -q '  /' '$tmp/dmd5' && cd '$tmp/xd' &&
             md5sum --quiet -c '$tmp/dmd5'"
    check "ddeb: /usr/share/doc/ddpc-dbgsym links to ddpc's (copyright, changelog)" \
        test "$(readlink "$tmp/xd/usr/share/doc/ddpc-dbgsym")" = ddpc
    for f in usr/bin/ddpc "usr/$libdir/libddpc.so.${debversion%-*}"; do
        id=$(LC_ALL=C readelf -n "$tmp/xdeb/$f" | sed -n 's/^ *Build ID: *//p')
        ids+=("$id")
        dbg=usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
        check "ddeb: /$f (build-id $id) has /$dbg" test -n "$id" -a -f "$tmp/xd/$dbg"
        check "ddeb: /$dbg has that build-id" \
            bash -c "LC_ALL=C readelf -n '$tmp/xd/$dbg' 2>/dev/null | grep -qx ' *Build ID: $id'"
        check "ddeb: /$dbg has ddpc_pg_all_reduce's symbol" \
            bash -c "nm '$tmp/xd/$dbg' | grep -q ' T ddpc_pg_all_reduce$'"
        check "deb: /$f's .gnu_debuglink names that file, with its CRC" \
            /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/debuglink.py" "$tmp/xdeb/$f" \
            "$tmp/xd/$dbg"
    done
    check "ddeb: Build-Ids lists the program's and the library's" \
        bash -c "sed -n 's/^Build-Ids: //p' '$tmp/dcontrol' | tr ' ' '\n' | sort |
                     diff -q - <(printf '%s\n' ${ids[*]} | sort) >/dev/null"
}

deb_man_pages() {
    local deb=$1 ddpc=$2 cmds c page missing=0
    rm -rf "$tmp/xm"
    dpkg-deb -x "$deb" "$tmp/xm"
    # The commands `ddpc --help` lists ("  train CONFIG ...", "  ckpt ls|show ..."), once each.
    cmds=$("$ddpc" --help | awk '/^  [a-z]+ / {print $1}' | sort -u)
    check "deb: ddpc --help lists its commands" test -n "$cmds"
    for c in "" $cmds; do
        page=ddpc${c:+-$c}
        if MANWIDTH=80 man -l "$tmp/xm/usr/share/man/man1/$page.1.gz" >"$tmp/$page.txt" 2>&1 &&
            grep -Eq "^ *$page +- " "$tmp/$page.txt"; then
            :
        else
            echo "    no usable man page $page.1.gz"
            missing=1
        fi
    done
    check "deb: man -l formats a page for ddpc and each command ($(echo $cmds))" test $missing -eq 0
    check "deb: ddpc-train(1) has train's usage as its SYNOPSIS" bash -c \
        "grep -A1 '^SYNOPSIS' '$tmp/ddpc-train.txt' | grep -q 'ddpc train CONFIG'"
}
