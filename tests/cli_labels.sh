#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ctest's labels (tests/labels.cmake): every test of this build is labelled unit or cli, never
# both, so `ctest -L unit` and `ctest -L cli` together run the suite; unit holds only
# tests/test_*.c executables; slow ones (allowed more than 300 s) are cli. Times are not asserted
# here (README.md gives the measured one).
# usage: cli_labels.sh DDPC_BIN SOURCE_DIR   (the build directory is DDPC_BIN's)
set -u
build=$(cd "$(dirname "$1")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

names() { (cd "$build" && ctest -N "$@") | awk '/Test +#[0-9]+:/ {print $3}' | sort; }
names >"$tmp/all"
names -L '^unit$' >"$tmp/unit"
names -L '^cli$' >"$tmp/cli"
names -L '^slow$' >"$tmp/slow"
check "this build has tests" test "$(wc -l <"$tmp/all")" -gt 100
check "some are unit, some cli" test -s "$tmp/unit" -a -s "$tmp/cli"
check "no test is both unit and cli" test -z "$(comm -12 "$tmp/unit" "$tmp/cli")"
comm -23 "$tmp/all" <(sort -m "$tmp/unit" "$tmp/cli") >"$tmp/unlabelled"
check "every test is unit or cli" test ! -s "$tmp/unlabelled"
[ -s "$tmp/unlabelled" ] && sed 's/^/    unlabelled: /' "$tmp/unlabelled"
check "unit holds only test_*.c executables" test -z "$(grep -v '^test_' "$tmp/unit")"
check "the CLI scripts are cli" test -z "$(grep '^cli_' "$tmp/unit")"
check "slow tests are cli" test -z "$(comm -23 "$tmp/slow" "$tmp/cli")"
check "cli_translate (900 s allowed) is slow" grep -qx cli_translate "$tmp/slow"
check "test_train_checkpoint (seconds) is cli, not unit" grep -qx test_train_checkpoint "$tmp/cli"
summary
