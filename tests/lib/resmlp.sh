# SPDX-License-Identifier: MIT
# Sourced (after check.sh) by the tests that build examples/resmlp against an installed ddpc as a
# user outside the tree does (cli_example_resmlp.sh, cli_train_plugin.sh).

# resmlp_install BUILD_DIR: `cmake --install` of the build into $tmp/prefix (checked); sets prefix
# and libdir (the folder holding libddpc.so and pkgconfig/).
resmlp_install() {
    prefix=$tmp/prefix
    cmake --install "$1" --prefix "$prefix" >"$tmp/install.log" 2>&1
    check_status "cmake --install into a scratch prefix" $? "$tmp/install.log"
    local pc
    pc=$(find "$prefix" -name ddpc.pc)
    libdir=$(dirname "$(dirname "$pc")")
}

# resmlp_cmake SOURCE_DIR WHAT [CMAKE_ARGS...]: find_package(ddpc) builds the example (and its
# plugin) into $tmp/cm, checked as "find_package(ddpc) builds WHAT".
resmlp_cmake() {
    local src=$1 what=$2
    shift 2
    cmake -S "$src/examples/resmlp" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" "$@" \
        >"$tmp/cm.log" 2>&1 && cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1
    check_status "find_package(ddpc) builds $what" $? "$tmp/cm.log"
}

# The training arguments both tests give the example's config: small, several workers, a
# checkpoint every 5 steps, tiny buckets so DDP has several.
resmlp_common=(data.size=512 data.eval_batch_size=64 epochs=2 max_steps=30 log_every=5
               eval_every=0 num_threads=1 data.shuffle=true data.num_workers=2
               checkpoint.every_steps=5 ddp.bucket_cap_mb=0.005 ddp.first_bucket_mb=0.001
               optim.lr=0.05)
