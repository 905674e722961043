// Package supplychain holds the tests of the repository's supply-chain
// checks (docs/SECURITY.md, "dependencies"): every npm install ignores
// install scripts, and no locked package has one; and the shell checks
// the Makefile runs behave as it says, and the Makefile runs them:
// _tools/vulndb-age.sh (the vulnerability database's age) and
// _tools/apt-install.sh (what make installs system-wide, said first).
package supplychain
