#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sourced by tests/cli_deb.sh and tests/deb/test_deb.sh after tests/lib/check.sh:
#     deb_contents DEB SOURCE_DIR
# checks the package's control fields (name, version from include/ddpc/version.h, the runtime
# libraries in Depends) and that `dpkg -c` lists everything `cmake --install` puts in place.

deb_contents() {
    local deb=$1 src=$2 version f
    version=$(awk '/^#define DDPC_VERSION_(MAJOR|MINOR|PATCH) /{v = v s $3; s = "."} END{print v}' \
        "$src/include/ddpc/version.h")
    dpkg-deb -f "$deb" Package Version Depends Recommends Suggests >"$tmp/control" 2>&1
    check "deb: package ddpc" grep -qx "Package: ddpc" "$tmp/control"
    check "deb: version $version" grep -qx "Version: $version" "$tmp/control"
    for f in libopenblas0-openmp libyaml-0-2 zlib1g libdnnl2 libgomp1 libc6; do
        check "deb: Depends names $f" grep -Eq "^Depends: (.*, )?$f( |,|$)" "$tmp/control"
    done
    check "deb: Recommends the configs' data" \
        grep -qx "Recommends: dataset-fashion-mnist, fortunes" "$tmp/control"
    check "deb: Suggests the -dev packages a static link needs" \
        grep -Eq "^Suggests: .*libopenblas-openmp-dev.*libopenmpi-dev" "$tmp/control"
    dpkg-deb -I "$deb" shlibs >"$tmp/shlibs" 2>&1
    check "deb: a shlibs file for libddpc.so.0" \
        grep -qx "libddpc 0 ddpc (>= $version)" "$tmp/shlibs"
    dpkg-deb -I "$deb" triggers postinst >"$tmp/ldconfig" 2>&1
    check "deb: runs ldconfig on install" grep -q ldconfig "$tmp/ldconfig"
    dpkg -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/files"
    for f in /usr/bin/ddpc /usr/lib/libddpc.a /usr/lib/libddpc.so /usr/lib/libddpc.so.0 \
        "/usr/lib/libddpc.so.$version" /usr/lib/pkgconfig/ddpc.pc \
        /usr/lib/pkgconfig/ddpc-static.pc \
        /usr/lib/cmake/ddpc/ddpcConfig.cmake /usr/lib/cmake/ddpc/ddpcConfigVersion.cmake \
        /usr/lib/cmake/ddpc/ddpcSharedTargets.cmake /usr/lib/cmake/ddpc/ddpcStaticTargets.cmake \
        /usr/share/doc/ddpc/README.md /usr/share/doc/ddpc/config.md \
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
}
