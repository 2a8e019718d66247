#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The installed library, as a user outside the tree meets it: `cmake --install` into a scratch
# prefix puts the program, libddpc.a and libddpc.so.MAJOR (SONAME, only the public API exported),
# the headers, ddpc.pc / ddpc-static.pc and the CMake package in place; examples/embed, copied out
# of the tree, builds through pkg-config (shared and static) and find_package (both targets), runs
# against the installed library and trains (its loss falls); the installed ddpc reports the
# version and trains; ddpc configures as a subproject (add_subdirectory) without its tests.
# usage: cli_install.sh DDPC_BIN SOURCE_DIR   (the build directory is DDPC_BIN's)
set -u
ddpc=$1
src=$2
build=$(cd "$(dirname "$ddpc")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
fmnist=/usr/share/datasets/fashion-mnist
prefix=$tmp/prefix

# The version's one definition (include/ddpc/version.h) as "MAJOR.MINOR.PATCH".
version=$(awk '/^#define DDPC_VERSION_(MAJOR|MINOR|PATCH) /{v = v sep $3; sep = "."} END{print v}' \
    "$src/include/ddpc/version.h")

# `make install PREFIX=...` is this command (checked without running make's build step here).
check "make install passes PREFIX to cmake --install" bash -c "make -s -n -C '$src' install \
    BUILD='$build' PREFIX=/opt/x | grep -qx 'cmake --install $build --prefix /opt/x'"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1
check "cmake --install into $prefix" test $? -eq 0
pc=$(find "$prefix" -name ddpc.pc)
libdir=$(dirname "$(dirname "$pc")")
check "ddpc.pc installed under the libdir's pkgconfig/" test -n "$pc" -a -f "$libdir/libddpc.a"
check "program installed" test -x "$prefix/bin/ddpc"
check "shared library and its links" test -L "$libdir/libddpc.so" \
    -a -L "$libdir/libddpc.so.${version%%.*}" \
    -a -f "$libdir/libddpc.so.$version"
check "CMake package installed" test -f "$libdir/cmake/ddpc/ddpcConfig.cmake" \
    -a -f "$libdir/cmake/ddpc/ddpcConfigVersion.cmake"
check "configs and docs installed" test -f "$prefix/share/ddpc/configs/fmnist_mlp.yaml" \
    -a -f "$prefix/share/doc/ddpc/README.md" \
    -a -f "$prefix/share/doc/ddpc/examples/embed/train_mlp.c"
check "every public header installed" diff <(cd "$src/include/ddpc" && ls ./*.h) \
    <(cd "$prefix/include/ddpc" && ls ./*.h)
soname=$(readelf -d "$libdir/libddpc.so.$version" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
check "SONAME is libddpc.so.MAJOR ($soname)" test "$soname" = "libddpc.so.${version%%.*}"

# Exported = declared: every function the public headers declare (less their static inline
# helpers) and nothing else, so internals (ddpc__*) and dependencies' symbols stay private.
# Typedefs of function pointers (`typedef ddpc_status (*fn)(...)`) and function-pointer members
# of a table (`ddpc_status (*build)(...)`, ddpc/model_ops.h) declare no function.
cat "$src"/include/ddpc/*.h | grep -v '^ *#' | grep -v '^ *typedef' |
    sed -E 's/\bddpc_[a-z0-9_]+ *\(\*//g' | grep -oE '\bddpc_[a-z0-9_]+ *\(' | tr -d ' (' |
    sort -u >"$tmp/declared.all"
grep -hoE 'static inline [^(]*\bddpc_[a-z0-9_]+\(' "$src"/include/ddpc/*.h |
    grep -oE 'ddpc_[a-z0-9_]+\($' | tr -d '(' | sort -u >"$tmp/inline"
# ddpc_plugin_init is declared for a plugin to define (ddpc/plugin.h): ddpc calls it, never has it
comm -23 "$tmp/declared.all" "$tmp/inline" | grep -vx ddpc_plugin_init >"$tmp/declared"
nm -D --defined-only "$libdir/libddpc.so.$version" | awk '$2 ~ /[TDBRVW]/ {print $3}' | sort -u \
    >"$tmp/exported"
diff "$tmp/declared" "$tmp/exported" >"$tmp/symdiff"
check "libddpc.so exports exactly the $(wc -l <"$tmp/declared") declared functions" \
    test ! -s "$tmp/symdiff"
[ -s "$tmp/symdiff" ] && sed 's/^/    /' "$tmp/symdiff" | head -20

export PKG_CONFIG_PATH=$libdir/pkgconfig
check "pkg-config --modversion ddpc is $version" test "$(pkg-config --modversion ddpc)" = "$version"
check "ddpc-static.pc names libddpc.a and the dependencies" \
    grep -Eq '^Libs: .*libddpc\.a .*openblas.* -lz' "$libdir/pkgconfig/ddpc-static.pc"
check "ddpc.pc's Libs.private lists the static dependencies" \
    bash -c "pkg-config --static --libs ddpc | grep -q -- '-lddpc .*yaml.* -lz'"

# train NAME BINARY [DATA [ENV...]]: runs the example on DATA (Fashion-MNIST by default); checks
# the loss falls and the library it ran against reports the installed version.
train() {
    local name=$1 bin=$2 data=${3:-$fmnist}
    shift 3 2>/dev/null || shift 2
    local log="$tmp/train-${name// /-}.log"
    env "$@" "$bin" "$data" 300 >"$log" 2>&1
    local rc=$?
    local loss
    local num='\([0-9.]*\)'
    loss=$(sed -n "s/^mean loss: first 50 steps $num, last 50 steps $num.*/\1 -> \2/p" "$log")
    if [ $rc -eq 0 ] && grep -q "^mean loss: .*: decreasing$" "$log" &&
        grep -q "^ddpc headers $version, library $version$" "$log"; then
        ok "$name trains, loss $loss"
    else
        fail "$name trains (exit $rc)" "$log"
    fi
}

# pkg-config, shared: the program needs the installed libddpc.so.MAJOR and finds it through
# LD_LIBRARY_PATH (the prefix is not on the loader's path).
cp -r "$src/examples/embed" "$tmp/pc-shared"
make -C "$tmp/pc-shared" >"$tmp/pc-shared.log" 2>&1
check_status "make (pkg-config ddpc) builds the example" $? "$tmp/pc-shared.log"
check "it needs libddpc.so.MAJOR" \
    bash -c "readelf -d '$tmp/pc-shared/train_mlp' | grep -q 'NEEDED.*\[$soname\]'"
check "ldd: libddpc is not found without LD_LIBRARY_PATH" \
    bash -c "ldd '$tmp/pc-shared/train_mlp' | grep -q '$soname => not found'"
check "ldd: libddpc resolves to the installed one" bash -c "LD_LIBRARY_PATH='$libdir' \
    ldd '$tmp/pc-shared/train_mlp' | grep -q '$soname => $libdir/$soname'"
train "pkg-config shared build" "$tmp/pc-shared/train_mlp" "$fmnist" LD_LIBRARY_PATH="$libdir"
train "pkg-config shared build, synthetic data" "$tmp/pc-shared/train_mlp" synthetic \
    LD_LIBRARY_PATH="$libdir"

# pkg-config, static: libddpc.a linked in, no libddpc.so needed.
cp -r "$src/examples/embed" "$tmp/pc-static"
make -C "$tmp/pc-static" PKG=ddpc-static >"$tmp/pc-static.log" 2>&1
check_status "make PKG=ddpc-static builds the example" $? "$tmp/pc-static.log"
check "the static build needs no libddpc.so" \
    bash -c "! readelf -d '$tmp/pc-static/train_mlp' | grep -q libddpc"
train "pkg-config static build" "$tmp/pc-static/train_mlp"

# find_package(ddpc): ddpc::ddpc (shared; CMake's build RUNPATH finds it) and ddpc::ddpc_static.
for kind in shared static; do
    static=OFF
    [ $kind = static ] && static=ON
    cmake -S "$src/examples/embed" -B "$tmp/cm-$kind" -DCMAKE_PREFIX_PATH="$prefix" \
        -DDDPC_STATIC=$static >"$tmp/cm-$kind.log" 2>&1 &&
        cmake --build "$tmp/cm-$kind" >>"$tmp/cm-$kind.log" 2>&1
    check_status "find_package(ddpc) builds the example ($kind)" $? "$tmp/cm-$kind.log"
done
check "ddpc::ddpc links the installed libddpc.so" \
    bash -c "ldd '$tmp/cm-shared/train_mlp' | grep -q '$soname => $libdir/$soname'"
check "ddpc::ddpc_static links no libddpc.so" \
    bash -c "! readelf -d '$tmp/cm-static/train_mlp' | grep -q libddpc"
train "find_package shared build" "$tmp/cm-shared/train_mlp"
train "find_package static build" "$tmp/cm-static/train_mlp"
# The package's version file refuses a request it does not satisfy.
mkdir -p "$tmp/cm-99" && cp "$src/examples/embed/train_mlp.c" "$tmp/cm-99/" &&
    sed "s/find_package(ddpc 0.1 REQUIRED)/find_package(ddpc 99.0 REQUIRED)/" \
        "$src/examples/embed/CMakeLists.txt" >"$tmp/cm-99/CMakeLists.txt"
cmake -S "$tmp/cm-99" -B "$tmp/cm-99/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cm-99.log" 2>&1
check "find_package(ddpc 99.0) is refused, naming version $version" \
    bash -c "! grep -q 'Configuring done' '$tmp/cm-99.log' \
        && grep -q 'version: $version' '$tmp/cm-99.log'"

# Without the C language, the static component cannot find what libddpc.a needs: asking for it
# fails with a message naming what is missing, while the shared target alone is still found.
mkdir -p "$tmp/nolang-static" "$tmp/nolang-shared"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(x NONE)\nfind_package(ddpc REQUIRED%s)\n' \
    " COMPONENTS static" >"$tmp/nolang-static/CMakeLists.txt"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(x NONE)\nfind_package(ddpc REQUIRED)\n%s\n' \
    'if(NOT TARGET ddpc::ddpc OR TARGET ddpc::ddpc_static)
message(FATAL_ERROR "wrong targets")
endif()' >"$tmp/nolang-shared/CMakeLists.txt"
cmake -S "$tmp/nolang-static" -B "$tmp/nolang-static/b" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$tmp/nolang-static.log" 2>&1
check "find_package(ddpc COMPONENTS static) without its dependencies fails, saying why" \
    bash -c "! grep -q 'Configuring done' '$tmp/nolang-static.log' \
        && grep -q 'ddpc::ddpc_static needs' '$tmp/nolang-static.log' \
        && grep -q 'missing: the C' '$tmp/nolang-static.log'"
cmake -S "$tmp/nolang-shared" -B "$tmp/nolang-shared/b" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$tmp/nolang-shared.log" 2>&1
check_status "while find_package(ddpc) still gives ddpc::ddpc (only)" $? \
    "$tmp/nolang-shared.log"

# The installed program.
check "installed ddpc --version says $version" \
    test "$("$prefix/bin/ddpc" --version)" = "ddpc $version"
"$prefix/bin/ddpc" env >"$tmp/env.log" 2>&1
check "installed ddpc env reports the version" grep -Eq "^ +ddpc: +$version$" "$tmp/env.log"
"$prefix/bin/ddpc" train "$prefix/share/ddpc/configs/fmnist_mlp.yaml" max_steps=30 log_every=10 \
    num_threads=1 run_dir="$tmp/run" >"$tmp/train.log" 2>&1
check "installed ddpc trains an installed config" test $? -eq 0 -a -s "$tmp/run/metrics.jsonl"
check "and logs steps 10, 20, 30" \
    test "$(grep -c '"step": [123]0, "epoch"' "$tmp/run/metrics.jsonl")" -eq 3

# A superproject that adds ddpc with add_subdirectory configures, gets the library and program
# targets, and neither ddpc's tests nor its install rules.
mkdir -p "$tmp/super"
cat >"$tmp/super/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.20)
project(super C)
add_subdirectory("$src" ddpc)
add_executable(app app.c)
target_link_libraries(app PRIVATE ddpc_lib)
EOF
echo 'int main(void) { return 0; }' >"$tmp/super/app.c"
cmake -S "$tmp/super" -B "$tmp/super/build" >"$tmp/super.log" 2>&1
check_status "ddpc configures as a subproject" $? "$tmp/super.log"
cmake --build "$tmp/super/build" --target help >"$tmp/super-targets" 2>&1
check "the subproject has ddpc_lib, ddpc_shared and ddpc" \
    bash -c "grep -q ddpc_lib '$tmp/super-targets' && grep -q ddpc_shared '$tmp/super-targets' \
        && grep -q '\.\.\. ddpc$' '$tmp/super-targets'"
check "but not ddpc's tests" bash -c "! grep -q test_core '$tmp/super-targets'"
check "nor its install rules" \
    bash -c "! grep -q 'libddpc' '$tmp/super/build/ddpc/cmake_install.cmake'"
cmake -S "$tmp/super" -B "$tmp/super/build" -DDDPC_INSTALL=ON >>"$tmp/super.log" 2>&1
check "unless DDPC_INSTALL=ON" grep -q 'libddpc' "$tmp/super/build/ddpc/cmake_install.cmake"

# DESTDIR is honoured, and the pc files find a prefix that was moved after installing.
DESTDIR="$tmp/dest" cmake --install "$build" --prefix /usr/x >"$tmp/destdir.log" 2>&1
check "DESTDIR=D cmake --install --prefix /usr/x installs under D/usr/x" \
    test -x "$tmp/dest/usr/x/bin/ddpc" -a ! -e /usr/x
mv "$prefix" "$tmp/moved"
cp -r "$src/examples/embed" "$tmp/pc-moved"
PKG_CONFIG_PATH="$tmp/moved/${libdir#"$prefix"/}/pkgconfig" make -C "$tmp/pc-moved" \
    >"$tmp/pc-moved.log" 2>&1
check_status "a moved prefix still builds the example through pkg-config" $? \
    "$tmp/pc-moved.log"
train "moved prefix build" "$tmp/pc-moved/train_mlp" synthetic \
    LD_LIBRARY_PATH="$tmp/moved/${libdir#"$prefix"/}"

summary
