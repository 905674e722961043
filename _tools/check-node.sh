#!/usr/bin/env bash
# check-node.sh MAJOR: fails, saying why, unless the node on PATH is Node.js
# MAJOR (the major release the lockfiles in _tools and infra/_tools were
# verified on) and its npm reads lockfileVersion 3 (npm 7 or later).
# The Makefile runs it before every npm ci and every target that starts
# node (NODE_MAJOR).
set -euo pipefail
want=${1:?usage: check-node.sh MAJOR}

if ! v=$(node --version 2>/dev/null); then
	echo "node is not on PATH: the emulators and the CDK CLI need Node.js $want (Debian: apt-get install nodejs; NODE_MAJOR in the Makefile)" >&2
	exit 1
fi
major=${v#v}
major=${major%%.*}
if [ "$major" != "$want" ]; then
	echo "node $v is on PATH ($(command -v node)), but the tools are pinned to Node.js $want (NODE_MAJOR in the Makefile; _tools/package-lock.json and infra/_tools/package-lock.json are verified on it): put Node.js $want first on PATH" >&2
	exit 1
fi
if ! npmv=$(npm --version 2>/dev/null); then
	echo "npm is not on PATH: it installs the pinned tools (npm ci); it comes with Node.js $want" >&2
	exit 1
fi
npm_major=${npmv%%.*}
if ! [[ $npm_major =~ ^[0-9]+$ ]] || [ "$npm_major" -lt 7 ]; then
	echo "npm $npmv cannot read the lockfiles (lockfileVersion 3 needs npm 7 or later)" >&2
	exit 1
fi
echo "node $v, npm $npmv (pinned: Node.js $want)"
