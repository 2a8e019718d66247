#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deploy/: the Kubernetes manifests parse with the kinds and fields deploy/README.md describes,
# the Dockerfile's steps are README.md's Install commands (tests/deploy_check.py), and every
# ddpc command the manifests run is accepted by `ddpc plan` at the job's world size (an unknown
# or malformed key would fail there as it would in the pods).
# usage: cli_deploy.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

/usr/bin/python3 "$src/tests/deploy_check.py" "$src" >"$tmp/out" 2>&1
rc=$?
grep -v '^plan ' "$tmp/out"
check "deploy_check.py passes" test $rc -eq 0
n=0
while read -r _ config nproc overrides; do
    n=$((n + 1))
    # shellcheck disable=SC2086 # the overrides are separate key=value words
    "$ddpc" plan "$config" --nproc "$nproc" $overrides >"$tmp/plan$n" 2>&1
    check_status "ddpc plan accepts $(basename "$config") --nproc $nproc $overrides" $? \
        "$tmp/plan$n"
done < <(grep '^plan ' "$tmp/out")
check "both manifests' commands were planned" test $n -eq 2
summary
