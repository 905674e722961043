// Package supplychain holds the tests of the repository's supply-chain
// checks: every go.mod names the Go release the Makefile pins
// (GO_RELEASE); every npm install ignores install scripts, and no locked
// package has one; and the shell checks the Makefile runs behave as
// docs/operations/SECURITY.md says: _tools/check-node.sh (the Node.js major),
// _tools/vulndb-age.sh (the vulnerability database's age) and
// _tools/apt-install.sh (what make installs system-wide, said first).
package supplychain
