# SPDX-License-Identifier: MIT
# Shared preamble of the tests/cli_*.sh scripts, sourced (never run) right after their arguments:
#     . "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
# It makes $tmp, a scratch directory removed on exit, and the counters behind ok/fail/check.
# Invariant: every recorded check prints one "ok   NAME" or "FAIL NAME" line and adds one to
# passed or failed; summary, each script's last command, prints the totals and its status (the
# script's) is 0 only when nothing failed.
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ok NAME: records a passed check.
ok() {
    passed=$((passed + 1))
    echo "ok   $1"
}

# fail NAME [FILE...]: records a failed check, then shows each non-empty FILE indented.
fail() {
    failed=$((failed + 1))
    echo "FAIL $1"
    shift
    for f in "$@"; do [ -s "$f" ] && sed 's/^/    /' "$f"; done
    return 0
}

# check NAME COMMAND...: runs COMMAND; passes when it exits 0.
check() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}

# check_status NAME STATUS [FILE...]: passes when STATUS (say $? of the command just run) is 0,
# else fails showing each FILE, as fail does.
check_status() {
    local name=$1 status=$2
    shift 2
    if [ "$status" -eq 0 ]; then ok "$name"; else fail "$name (exit $status)" "$@"; fi
}

# summary: prints "P passed, F failed"; true only when F is 0.
summary() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
