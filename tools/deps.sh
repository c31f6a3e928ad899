#!/usr/bin/env bash
# Install the Debian packages kvcmp needs, when any is missing.
# Usage: tools/deps.sh PACKAGE...
set -u
missing=()
for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
    echo "kvcmp: missing Debian packages: ${missing[*]}" >&2
    echo "kvcmp: install them as root, then re-run make:" >&2
    echo "    $command" >&2
    exit 1
fi
echo "kvcmp: installing missing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
    echo "kvcmp: installing failed; run it by hand and re-run make:" >&2
    echo "    $command" >&2
    exit 1
fi
