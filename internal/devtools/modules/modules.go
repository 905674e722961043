// Package modules knows this repository's Go modules: the ones go.work
// names, and a module proxy that serves them as a release would, for the
// tests that show what a team's module inherits (docs/guide/MODULES.md).
package modules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// Library is the module path of the library; the repository's other
// modules of its own have paths below it.
const Library = "github.com/lambdajobs/lambdajobs"

// Module is one module of the repository: its path, its directory and its
// parsed go.mod.
type Module struct {
	Path string
	Dir  string
	File *modfile.File
}

// Ours reports whether a module path is one of this repository's own
// (the library, or a module below it such as .../infra).
func Ours(p string) bool {
	return p == Library || strings.HasPrefix(p, Library+"/")
}

// Workspace returns the modules root/go.work uses, in its order.
func Workspace(root string) ([]Module, error) {
	name := filepath.Join(root, "go.work")
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork(name, raw, nil)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, u := range work.Use {
		dir := filepath.Join(root, filepath.FromSlash(u.Path))
		gomod := filepath.Join(dir, "go.mod")
		raw, err := os.ReadFile(gomod)
		if err != nil {
			return nil, fmt.Errorf("go.work uses %s: %w", u.Path, err)
		}
		f, err := modfile.Parse(gomod, raw, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s: no module line", gomod)
		}
		mods = append(mods, Module{Path: f.Module.Mod.Path, Dir: dir, File: f})
	}
	return mods, nil
}

// WriteProxy writes into dir a module proxy (the layout GOPROXY=file://dir
// reads: <module>/@v/list, <version>.info, .mod and .zip) serving each of
// mods at version. A module's zip holds what `git ls-files` lists in its
// directory (tracked files and new ones not ignored, as a commit of the
// tree would), less what the go command leaves out of a module zip
// (nested modules, vendor directories): what a tag of the tree would serve.
func WriteProxy(dir, version string, mods []Module) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("modules: %q is not a canonical semantic version", version)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for _, m := range mods {
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		at := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(at, 0o755); err != nil {
			return err
		}
		gomod, err := os.ReadFile(filepath.Join(m.Dir, "go.mod"))
		if err != nil {
			return err
		}
		files, err := tracked(m.Dir)
		if err != nil {
			return fmt.Errorf("modules: %s: %w", m.Path, err)
		}
		var z bytes.Buffer
		if err := zip.Create(&z, module.Version{Path: m.Path, Version: version}, files); err != nil {
			return fmt.Errorf("modules: the zip of %s: %w", m.Path, err)
		}
		for name, data := range map[string][]byte{
			"list":            []byte(version + "\n"),
			version + ".info": info,
			version + ".mod":  gomod,
			version + ".zip":  z.Bytes(),
		} {
			if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// tracked lists the files of dir that git would commit (tracked, or new
// and not ignored), skipping tracked files deleted from the tree.
func tracked(dir string) ([]zip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	seen := map[string]bool{}
	var files []zip.File
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		full := filepath.Join(dir, filepath.FromSlash(name))
		st, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: path.Clean(name), full: full, info: st})
	}
	return files, nil
}

// file is one file of a module's directory, as zip.Create reads it.
type file struct {
	name, full string
	info       fs.FileInfo
}

func (f file) Path() string                 { return f.name }
func (f file) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.full) }

// Tags are the git tags that release mods at version, one per module of
// ours: version for the module at root, dir/version for one in dir below
// it (the go command's rule for a module in a subdirectory of its
// repository). docs/guide/MODULES.md, "Releasing", has the steps.
func Tags(root, version string, mods []Module) ([]string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Prerelease(version) != "" {
		return nil, fmt.Errorf("release %q: want a version such as v0.1.0", version)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	var tags []string
	for _, m := range mods {
		if !Ours(m.Path) {
			continue
		}
		dir, err := filepath.Abs(m.Dir)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(abs, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("module %s is outside %s", m.Path, root)
		}
		rel = filepath.ToSlash(rel)
		if want := strings.TrimPrefix(strings.TrimPrefix(m.Path, Library), "/"); want != strings.TrimPrefix(rel, ".") {
			return nil, fmt.Errorf("module %s is in %s: a tag of its directory would not name it", m.Path, rel)
		}
		if rel == "." {
			tags = append(tags, version)
		} else {
			tags = append(tags, rel+"/"+version)
		}
	}
	return tags, nil
}
