// Command release tags every module of this repository at one version, on
// the commit checked out: make release VERSION=v0.1.0 runs it after make
// apidiff. It refuses a tree with changes, a version the CHANGELOG has no
// section for, and a tag that exists; with -n it prints the tags only.
// docs/guide/MODULES.md, "Releasing", has the steps around it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/lambdajobs/lambdajobs/internal/devtools/modules"
)

func main() {
	version := flag.String("version", "", "the release, such as v0.1.0")
	root := flag.String("root", "../..", "the repository's root")
	dry := flag.Bool("n", false, "print the tags, create none")
	flag.Parse()
	if err := release(*root, *version, *dry); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func release(root, version string, dry bool) error {
	mods, err := modules.Workspace(root)
	if err != nil {
		return err
	}
	tags, err := modules.Tags(root, version, mods)
	if err != nil {
		return err
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	if !strings.Contains(string(changelog), "\n## ["+strings.TrimPrefix(version, "v")+"] - ") {
		return fmt.Errorf("CHANGELOG.md has no section \"## [%s] - DATE\": move Unreleased there first", strings.TrimPrefix(version, "v"))
	}
	if dry {
		fmt.Println(strings.Join(tags, "\n"))
		return nil
	}
	if out, err := git(root, "status", "--porcelain"); err != nil || out != "" {
		return fmt.Errorf("the tree has changes (or git failed: %v): release a commit", err)
	}
	for _, tag := range tags {
		if _, err := git(root, "rev-parse", "-q", "--verify", "refs/tags/"+tag); err == nil {
			return fmt.Errorf("tag %s exists", tag)
		}
	}
	for _, tag := range tags {
		if _, err := git(root, "tag", "-a", tag, "-m", "lambdajobs "+version); err != nil {
			return fmt.Errorf("tag %s: %w", tag, err)
		}
		fmt.Println(tag)
	}
	return nil
}

func git(root string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}
