#!/bin/sh
# Lays out the whole file system of the container image in a folder: the binary, the
# shared libraries it loads (the C library and the dynamic loader, as `ldd` lists them),
# the CA bundle, and a passwd/group entry for the unprivileged user 65532. Nothing else:
# no shell, no package manager. The Dockerfile copies the folder onto an empty image.
#
#   deploy/image-rootfs.sh <binary> <folder>
set -eu

binary=$1
root=$2

mkdir -p "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
install -m 0755 "$binary" "$root/custom-scheduler"

# Every library with a path in ldd's answer, the loader included, at the same path.
ldd "$binary" | awk '/\//{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u |
    while read -r lib; do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done

if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
fi
echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$root/etc/passwd"
echo 'nonroot:x:65532:' >"$root/etc/group"
