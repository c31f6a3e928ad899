#!/usr/bin/env bash
# Install the Debian packages kvcmp needs, when any is missing.
# Usage: tools/deps.sh PACKAGE...
# As root it runs apt-get; otherwise it prints the command and fails,
# unless KVCMP_DEPS_SUDO=1 and sudo needs no password (a CI runner's
# user: action.yml sets it), when it runs apt-get through sudo.
set -u
missing=()
for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
sudo=()
if [ "$(id -u)" != 0 ]; then
    if [ "${KVCMP_DEPS_SUDO:-}" = 1 ] && command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
        sudo=(sudo -n env DEBIAN_FRONTEND=noninteractive)
    else
        echo "kvcmp: missing Debian packages: ${missing[*]}" >&2
        echo "kvcmp: install them as root (or in a container whose user is root), then re-run make:" >&2
        echo "    $command" >&2
        exit 1
    fi
fi
echo "kvcmp: installing missing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
    echo "kvcmp: installing failed; run it by hand and re-run make:" >&2
    echo "    $command" >&2
    exit 1
fi
