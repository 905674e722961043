#!/usr/bin/env bash
# vulndb-age.sh VERSION MAX_DAYS: states the age of the offline Go
# vulnerability database, the golang.org/x/vulndb module at VERSION (a
# pseudo-version, which carries its commit's time), measured against
# `date`, and fails when it is more than MAX_DAYS days old: a scan against
# a stale database passes code that has known vulnerabilities.
# make vulncheck runs it (VULN_VERSION, VULNDB_MAX_AGE_DAYS).
set -euo pipefail
version=${1:?usage: vulndb-age.sh VERSION MAX_DAYS}
max=${2:?usage: vulndb-age.sh VERSION MAX_DAYS}

if ! [[ $max =~ ^[0-9]+$ ]]; then
	echo "the bound on the vulnerability database's age must be a number of days, not \"$max\"" >&2
	exit 1
fi
# A pseudo-version: vX.Y.Z-[pre.]YYYYMMDDhhmmss-commit.
ts=${version%-*}
ts=${ts##*[-.]}
if ! [[ $ts =~ ^[0-9]{14}$ ]]; then
	echo "cannot read a date from golang.org/x/vulndb@$version (want a pseudo-version such as v0.0.0-20261105234957-e22db6528018)" >&2
	exit 1
fi
day="${ts:0:4}-${ts:4:2}-${ts:6:2}"
if ! then=$(date -u -d "$day ${ts:8:2}:${ts:10:2}:${ts:12:2}" +%s 2>/dev/null); then
	echo "cannot read a date from golang.org/x/vulndb@$version ($day is no day)" >&2
	exit 1
fi
now=$(date -u +%s)
age=$(((now - then) / 86400))
echo "vulnerability database: golang.org/x/vulndb@$version of $day, $age days old (bound: $max days)"
if [ "$age" -gt "$max" ]; then
	echo "the vulnerability database is $age days old, more than the bound of $max days: set VULN_VERSION in the Makefile to a newer golang.org/x/vulndb (go list -m golang.org/x/vulndb@latest names the newest the proxy serves)" >&2
	exit 1
fi
