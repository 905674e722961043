package supplychain

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The package the tests install: no real command has its name.
const fakePkg = "lambdajobs-fake-browser"

// aptFakes stands in for apt-get, apt-cache, dpkg-query and id (the
// script's PATH holds them and the few real commands it uses, nothing
// else; FAKE_DIR names their folder). The fake apt-get install
// "installs" a package (its command and its dpkg record) and says so on
// stderr, which the test reads in order with what the script printed;
// each call is also logged to calls.
func aptFakes(t *testing.T, uid string) *fakes {
	t.Helper()
	f := newFakes(t)
	f.link("bash", "sed", "wc", "env", "chmod", "cat")
	f.add("id", `[ "$1" = -u ] && echo `+uid)
	f.add("apt-cache", `[ "$1" = policy ] && echo "$2:" && echo "  Installed: (none)" && echo "  Candidate: $FAKE_CANDIDATE"`)
	f.add("dpkg-query", `cat "$FAKE_DIR/installed-${!#}" 2>/dev/null`)
	f.add("apt-get", `d=$FAKE_DIR; echo "apt-get $*" >>"$d/calls"
case " $* " in
*" update "*) ;;
*" -s "*)
	want="${!#}"; pkg=${want%%=*}; v=${want#*=}
	[ "$v" = "$FAKE_UNINSTALLABLE" ] && { echo "E: Version '$v' for '$pkg' was not found"; exit 100; }
	echo "NOTE: This is only a simulation!"
	echo "Inst libfake-dep [1.0-1] (1.2-3 Debian:12.12/oldstable [amd64]) []"
	echo "Inst $pkg ($v Debian-Security:12/oldstable-security [amd64])"
	echo "Conf $pkg ($v Debian-Security:12/oldstable-security [amd64])";;
*" install "*)
	want="${!#}"; pkg=${want%%=*}; v=${want#*=}
	echo "FAKE: apt-get install $want" >&2
	printf '#!/bin/bash\n' >"$d/$pkg"; chmod +x "$d/$pkg"; printf '%s' "$v" >"$d/installed-$pkg";;
esac`)
	return f
}

// link puts the real commands names in the folder (for a PATH that holds
// nothing else).
func (f *fakes) link(names ...string) {
	f.t.Helper()
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			f.t.Fatalf("%s is needed by the script under test: %v", n, err)
		}
		if err := os.Symlink(p, filepath.Join(f.dir, n)); err != nil {
			f.t.Fatal(err)
		}
	}
}

// calls is what the fake apt-get and sudo were asked, in order.
func (f *fakes) calls() string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "calls"))
	return string(b)
}

// What make installs system-wide it says first, package by package with
// versions, then installs exactly that version (_tools/apt-install.sh).
func TestAptInstallSaysWhatItInstallsBeforeItDoes(t *testing.T) {
	t.Parallel()
	f := aptFakes(t, "0")
	out, code := runScript(t, "apt-install.sh", f.dir, []string{"FAKE_DIR=" + f.dir, "FAKE_CANDIDATE=156.0.8078.114-1~deb12u1"}, fakePkg, fakePkg, "150")
	if code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, out)
	}
	plan := []string{
		"installing system-wide with apt-get, " + fakePkg + " pinned to 156.0.8078.114-1~deb12u1; apt-get installs these 2 packages:",
		"  libfake-dep=1.2-3 (Debian:12.12/oldstable [amd64]; replaces 1.0-1)",
		"  " + fakePkg + "=156.0.8078.114-1~deb12u1 (Debian-Security:12/oldstable-security [amd64])",
	}
	install := strings.Index(out, "FAKE: apt-get install")
	for _, line := range plan {
		i := strings.Index(out, line+"\n")
		if i < 0 || install < 0 || i > install {
			t.Errorf("the plan line %q is not said before apt-get installs; output:\n%s", line, out)
		}
	}
	if !strings.Contains(out, "FAKE: apt-get install "+fakePkg+"=156.0.8078.114-1~deb12u1\n") {
		t.Errorf("apt-get did not install the pinned version; output:\n%s", out)
	}
	if !strings.HasSuffix(out, "installed "+fakePkg+" 156.0.8078.114-1~deb12u1\n") {
		t.Errorf("the output does not end by naming what was installed:\n%s", out)
	}
	calls := f.calls()
	want := "apt-get update -qq\napt-get install -s -y " + fakePkg + "=156.0.8078.114-1~deb12u1\napt-get install -y -qq " + fakePkg + "=156.0.8078.114-1~deb12u1\n"
	if calls != want {
		t.Errorf("apt-get calls:\n%s\nwant:\n%s", calls, want)
	}

	// Run again: installed, it says so and changes nothing.
	out, code = runScript(t, "apt-install.sh", f.dir, []string{"FAKE_DIR=" + f.dir, "FAKE_CANDIDATE=157.0-1"}, fakePkg, fakePkg, "150")
	if code != 0 || !strings.Contains(out, fakePkg+" 156.0.8078.114-1~deb12u1 is installed system-wide") || !strings.Contains(out, "nothing to install") {
		t.Errorf("exit code %d, output:\n%s", code, out)
	}
	if f.calls() != want {
		t.Errorf("apt-get was called for an installed package:\n%s", f.calls())
	}
}

// A version named (CHROMIUM_VERSION) is installed as named, whatever the
// candidate; without sudo a user gets sudo's prompt, as root none.
func TestAptInstallPinsAVersionNamed(t *testing.T) {
	t.Parallel()
	f := aptFakes(t, "1000")
	f.add("sudo", `echo "sudo $*" >>"$FAKE_DIR/calls"; exec "$@"`)
	out, code := runScript(t, "apt-install.sh", f.dir, []string{"FAKE_DIR=" + f.dir, "FAKE_CANDIDATE=157.0-1"}, fakePkg, fakePkg, "150", "155.0.1-1~deb12u1")
	if code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, out)
	}
	if !strings.Contains(out, "  "+fakePkg+"=155.0.1-1~deb12u1 (") || !strings.Contains(out, "FAKE: apt-get install "+fakePkg+"=155.0.1-1~deb12u1\n") {
		t.Errorf("the version named was not the one said and installed; output:\n%s", out)
	}
	if c := f.calls(); !strings.Contains(c, "sudo apt-get update -qq\n") || !strings.Contains(c, "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "+fakePkg+"=155.0.1-1~deb12u1\n") {
		t.Errorf("a user's install does not go through sudo:\n%s", c)
	}
}

// When it cannot install what it would say, it installs nothing and says
// why.
func TestAptInstallRefusesWhatItCannotPin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, uid string
		env       []string
		says      string
	}{
		{name: "no candidate", uid: "0", env: []string{"FAKE_CANDIDATE=(none)"}, says: "Debian offers no " + fakePkg + " here"},
		{name: "candidate below the minimum", uid: "0", env: []string{"FAKE_CANDIDATE=149.0.7000.1-1"}, says: "older than release 150"},
		{name: "epoch and an old release", uid: "0", env: []string{"FAKE_CANDIDATE=1:12.0-1"}, says: "older than release 150"},
		{name: "apt-get cannot find it", uid: "0", env: []string{"FAKE_CANDIDATE=156.0-1", "FAKE_UNINSTALLABLE=156.0-1"}, says: "apt-get cannot install " + fakePkg + "=156.0-1"},
		{name: "no root, no sudo", uid: "1000", env: []string{"FAKE_CANDIDATE=156.0-1"}, says: "needs root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := aptFakes(t, tc.uid)
			out, code := runScript(t, "apt-install.sh", f.dir, append(tc.env, "FAKE_DIR="+f.dir), fakePkg, fakePkg, "150")
			if code == 0 {
				t.Errorf("exit code 0, want a failure; output:\n%s", out)
			}
			if !strings.Contains(out, tc.says) {
				t.Errorf("output %q does not say %q", out, tc.says)
			}
			if strings.Contains(out, "FAKE: apt-get install") || strings.Contains(f.calls(), "install -y -qq") {
				t.Errorf("it installed anyway:\n%s", f.calls())
			}
		})
	}
}

// make test installs chromium through the script, with a minimum.
func TestMakeInstallsChromiumThroughTheScript(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?ms)^chromium:[^\n]*\n((?:\t[^\n]*\n)+)`).FindSubmatch(mk)
	if recipe == nil {
		t.Fatal("the Makefile has no chromium target")
	}
	if got, want := strings.TrimSpace(string(recipe[1])), "@bash $(TOOLS_DIR)/apt-install.sh chromium chromium $(CHROMIUM_MIN_MAJOR) $(CHROMIUM_VERSION)"; got != want {
		t.Errorf("the chromium target runs %q, want %q", got, want)
	}
	if regexp.MustCompile(`(?m)^\t.*apt-get\s+install`).Match(mk) {
		t.Error("the Makefile calls apt-get install itself: install through _tools/apt-install.sh, which says what it installs first")
	}
}
