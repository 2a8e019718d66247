# SPDX-License-Identifier: MIT
# Sourced by the scripts that run ddpc in fresh Debian 12 roots made by debootstrap
# (deploy/fresh-debian.sh, bench/fresh_setup.sh): their shared start and the mounts a chroot
# needs, unmounted again by an EXIT trap whatever fails.

# debian_root_start SCRIPT ARGS...: checks that ARGS is one WORKDIR that does not exist yet, that
# this runs as root and that debootstrap is there (else the usage or what is missing, exit 2);
# sets src (the repo root, SCRIPT's parent folder's parent), work (WORKDIR, created, absolute)
# and mirror (DEBIAN_MIRROR, default deb.debian.org), and installs the unmount trap.
debian_root_start() {
    local script=$1
    shift
    if [ $# -ne 1 ] || [ -e "$1" ]; then
        echo "usage: $script WORKDIR   (a directory that does not exist yet)" >&2
        exit 2
    fi
    [ "$(id -u)" -eq 0 ] || { echo "$script: needs root (debootstrap, chroot)" >&2; exit 2; }
    command -v debootstrap >/dev/null ||
        { echo "$script: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
    src=$(cd "$(dirname "$script")/.." && pwd)
    work=$(mkdir -p "$1" && cd "$1" && pwd)
    mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
    mounted=()
    trap debian_root_unmount_all EXIT
}

debian_root_unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" || true; done
    mounted=()
}

# debian_root_mount ROOT [sys]: /proc and /dev (and /sys when asked) inside ROOT.
debian_root_mount() {
    mount -t proc proc "$1/proc" && mounted+=("$1/proc")
    if [ "${2:-}" = sys ]; then mount -t sysfs sysfs "$1/sys" && mounted+=("$1/sys"); fi
    mount --bind /dev "$1/dev" && mounted+=("$1/dev")
}
