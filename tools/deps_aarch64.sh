#!/usr/bin/env bash
# Install what make check-aarch64 needs, when any is missing: Debian's
# aarch64 cross compiler, qemu-user, and the arm64 (multiarch) MPFR, GMP,
# cJSON and libgomp.  The binaries run under qemu-user against the arm64
# multiarch libraries (the cross toolchain's own libc in
# /usr/aarch64-linux-gnu is not mixed in).  Exit 3: it cannot be installed
# here (not root, or the packages cannot be had), with the reason on stderr.
set -u
packages=(gcc-aarch64-linux-gnu qemu-user libmpfr-dev:arm64 libgmp-dev:arm64 libcjson-dev:arm64 libgomp1:arm64)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command="dpkg --add-architecture arm64 && apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
    echo "kvcmp: the aarch64 check needs Debian packages it cannot install without root: ${missing[*]}" >&2
    echo "kvcmp: install them as root, then re-run: $command" >&2
    exit 3
fi
echo "kvcmp: installing the aarch64 cross toolchain and arm64 libraries: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { dpkg --add-architecture arm64 && apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } > /tmp/kvcmp-deps-aarch64.log 2>&1; then
    tail -5 /tmp/kvcmp-deps-aarch64.log >&2
    echo "kvcmp: installing the aarch64 packages failed (log: /tmp/kvcmp-deps-aarch64.log); run it by hand: $command" >&2
    exit 3
fi
