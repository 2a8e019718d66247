#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Host names through `ddpc run`: every hostfile entry and --master-addr is checked before anything
# starts. A 5,000-character name, a name starting with '-' ('-oProxyCommand=...', which ssh would
# take for an option), a bad character, slots out of range or an unknown key are refused with one
# line naming file:line and the reason, and mpirun is never started; valid entries (DNS names,
# IPv4 and IPv6 literals, slots, max_slots, comments) reach mpirun unchanged.
# usage: cli_run_hostfile.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK TORCHELASTIC_RUN_ID DDPC_LAUNCHER OMPI_COMM_WORLD_SIZE PMI_SIZE

# A stand-in mpirun first in PATH: it records that it ran and its hostfile, then exits 0, so
# these checks need neither Open MPI nor ssh to the hosts they name.
mkdir "$tmp/bin"
cat >"$tmp/bin/mpirun" <<EOS
#!/bin/sh
echo "\$@" >"$tmp/mpirun.args"
exit 0
EOS
chmod +x "$tmp/bin/mpirun"
export PATH="$tmp/bin:$PATH"

# refused NAME FILE-CONTENT WANT: ddpc run --hostfile exits 1 with one line holding WANT, and
# mpirun never ran.
refused() {
    local name=$1 want=$3
    printf '%s' "$2" >"$tmp/hosts"
    rm -f "$tmp/mpirun.args"
    "$ddpc" run --nproc-per-node 2 --hostfile "$tmp/hosts" -- true >"$tmp/r.out" 2>"$tmp/r.err"
    local rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/r.err")" -eq 1 ] && grep -qF -- "$want" "$tmp/r.err" &&
        [ ! -e "$tmp/mpirun.args" ] && ok "$name: $(cut -c1-150 "$tmp/r.err")" ||
        fail "$name (exit $rc, mpirun ran: $([ -e "$tmp/mpirun.args" ] && echo yes || echo no))" \
            "$tmp/r.err"
}

long=$(head -c 5000 /dev/zero | tr '\0' a)
refused "5,000-character host name" "node1 slots=2
$long slots=2
" "ddpc run: $tmp/hosts:2: host name '$(head -c 40 <<<"$long")...' is longer than 4095 \
characters; DNS names have at most 253"
refused "300-character host name" "$(head -c 300 /dev/zero | tr '\0' b)
" "$tmp/hosts:1: host name 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb...' is 300 characters \
long; DNS names have at most 253"
refused "host name that is an ssh option" "# cluster
-oProxyCommand=touch\${IFS}$tmp/pwned slots=1
" "$tmp/hosts:2: host name '-oProxyCommand=touch\${IFS}/" 
grep -q "starts with '-', which ssh and mpirun would take for an option" "$tmp/r.err" &&
    [ ! -e "$tmp/pwned" ] && ok "  ... and says why" || fail "option-like host: reason" "$tmp/r.err"
refused "bad character" "node1
node_2;reboot
" "$tmp/hosts:2: host name 'node_2;reboot' is not an IPv4 or IPv6 address nor a DNS name"
refused "label over 63 characters" "$(head -c 64 /dev/zero | tr '\0' c).example
" "has a label of 64 characters at position 1 (1 to 63 allowed)"
refused "slots=0" "node1 slots=0
" "$tmp/hosts:1: slots '0' is not an integer in [1, 65536]"
refused "slots too large" "node1 slots=99999999999
" "$tmp/hosts:1: slots '99999999999' is not an integer in [1, 65536]"
refused "slots not a number" "node1 slots=four
" "$tmp/hosts:1: slots 'four' is not an integer in [1, 65536]"
refused "unknown key" "node1 slotz=2
" "$tmp/hosts:1: 'slotz=2' is not slots=N or max_slots=N"

# Valid entries: names, addresses, options and comments are accepted, mpirun gets the file.
printf '%s\n' "# the cluster" "node-1.example.com slots=4 max_slots=8" \
    "  10.0.0.2 slots=2 # spare" "fd00::3" "NODE4." "" "node-1.example.com" >"$tmp/good"
rm -f "$tmp/mpirun.args"
"$ddpc" run --nproc-per-node 2 --hostfile "$tmp/good" -- true >"$tmp/g.out" 2>"$tmp/g.err"
rc=$?
[ $rc -eq 0 ] && grep -q -- "-np 8 --hostfile $tmp/good " "$tmp/mpirun.args" &&
    ok "valid entries: 4 distinct hosts reach mpirun (-np 8)" ||
    fail "valid hostfile (exit $rc)" "$tmp/g.err" "$tmp/mpirun.args"

# --master-addr is checked the same way, before anything starts.
expect_refused_addr() { # name, address, expected substring
    "$ddpc" run --master-addr "$2" -- sh -c "touch $tmp/started" >"$tmp/a.out" 2>"$tmp/a.err"
    local rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/a.err")" -eq 1 ] && grep -qF -- "$3" "$tmp/a.err" &&
        [ ! -e "$tmp/started" ] && ok "$1: $(cut -c1-150 "$tmp/a.err")" ||
        fail "$1 (exit $rc)" "$tmp/a.err"
}
expect_refused_addr "--master-addr starting with '-'" "-oProxyCommand=x" \
    "ddpc run: --master-addr: host name '-oProxyCommand=x' starts with '-'"
expect_refused_addr "--master-addr of 5,000 characters" "$long" \
    "--master-addr: host name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is 5000 characters long"
expect_refused_addr "--master-addr with a space" "node 1" "is not an IPv4 or IPv6 address"
for addr in 127.0.0.1 localhost ::1; do
    "$ddpc" run --master-addr "$addr" -- sh -c 'echo "A=$MASTER_ADDR"' >"$tmp/m.out" 2>"$tmp/m.err"
    rc=$?
    [ $rc -eq 0 ] && grep -qx "A=$addr" "$tmp/m.out" && ok "--master-addr $addr accepted" ||
        fail "--master-addr $addr (exit $rc)" "$tmp/m.err"
done
summary
