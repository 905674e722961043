#!/usr/bin/env bash
# apt-install.sh PACKAGE COMMAND MIN_MAJOR [VERSION]: makes sure Debian's
# PACKAGE (which provides COMMAND) is installed system-wide. When COMMAND is
# on PATH it says which version is there and changes nothing. Otherwise it
# says, before installing anything, every package apt-get will install
# system-wide and its version, then installs exactly that: PACKAGE pinned
# to VERSION, or when VERSION is empty to the version Debian offers now
# (its candidate, which must be at least MIN_MAJOR). Why not a fixed
# version by default: Debian's security archive keeps only the newest
# build of a package such as chromium, so a fixed pin stops installing
# once it moves on, and the older build left in the main archive has known
# vulnerabilities. As root, or with sudo. The Makefile's chromium target
# runs it (CHROMIUM_VERSION, CHROMIUM_MIN_MAJOR).
set -euo pipefail
pkg=${1:?usage: apt-install.sh PACKAGE COMMAND MIN_MAJOR [VERSION]}
cmd=${2:?usage: apt-install.sh PACKAGE COMMAND MIN_MAJOR [VERSION]}
min=${3:?usage: apt-install.sh PACKAGE COMMAND MIN_MAJOR [VERSION]}
version=${4:-}

# upstream_major prints the upstream major release of a Debian version
# (1:156.0.8078.114-1~deb12u1 -> 156).
upstream_major() {
	local v=${1#*:}
	echo "${v%%.*}"
}

if path=$(command -v "$cmd"); then
	if have=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null) && [ -n "$have" ]; then
		echo "$pkg $have is installed system-wide ($path); nothing to install"
	else
		echo "$cmd is on PATH ($path), not from Debian's $pkg; nothing to install"
	fi
	exit 0
fi

sudo=
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "$pkg is missing and installing it system-wide needs root: run make as root, or install sudo, or run apt-get install $pkg yourself" >&2
		exit 1
	fi
	sudo=sudo
fi

echo "$pkg is missing: reading Debian's package lists (apt-get update)"
$sudo apt-get update -qq
if [ -z "$version" ]; then
	version=$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: *//p')
	if [ -z "$version" ] || [ "$version" = "(none)" ]; then
		echo "Debian offers no $pkg here (apt-cache policy $pkg has no candidate): add Debian's bookworm and bookworm-security archives to the apt sources" >&2
		exit 1
	fi
	major=$(upstream_major "$version")
	if ! [[ $major =~ ^[0-9]+$ ]] || [ "$major" -lt "$min" ]; then
		echo "Debian offers $pkg $version, older than release $min, the oldest this project accepts (the Makefile's minimum): refresh the apt sources (Debian's security archive), or name a version" >&2
		exit 1
	fi
fi

# What apt-get would do, package by package: "Inst NAME (VERSION ARCHIVE [ARCH])".
if ! plan=$(apt-get install -s -y "$pkg=$version" 2>&1); then
	echo "apt-get cannot install $pkg=$version:" >&2
	echo "$plan" >&2
	exit 1
fi
inst=$(echo "$plan" | sed -n \
	-e 's/^Inst \([^ ]*\) \[\([^]]*\)\] (\([^ ]*\) \([^)]*\)).*/  \1=\3 (\4; replaces \2)/p' \
	-e 's/^Inst \([^ ]*\) (\([^ ]*\) \([^)]*\)).*/  \1=\2 (\3)/p')
if [ -z "$inst" ]; then
	echo "apt-get plans to install nothing for $pkg=$version:" >&2
	echo "$plan" >&2
	exit 1
fi
echo "installing system-wide with apt-get, $pkg pinned to $version; apt-get installs these $(echo "$inst" | wc -l) packages:"
echo "$inst"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg=$version" >/dev/null
have=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
if [ "$have" != "$version" ] || ! command -v "$cmd" >/dev/null; then
	echo "$pkg=$version did not install (installed: ${have:-nothing}; $cmd on PATH: $(command -v "$cmd" || echo no))" >&2
	exit 1
fi
echo "installed $pkg $version"
