# lambdajobs: background jobs on AWS serverless parts.
# `make help` lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

GO          ?= go
# The Go release every target builds and tests with (the module proxy serves
# it; the first use downloads it). 1.26.10 fixes standard-library
# vulnerabilities that govulncheck reports in earlier 1.26 releases.
# Every go.mod's toolchain line names the same release (a test in
# internal/dev/supplychain, run by make lint, fails when they drift).
GO_RELEASE  := go1.26.10
export GOTOOLCHAIN := $(GO_RELEASE)
# The Node.js major release the tools of _tools and infra/_tools are
# locked and verified on; checked before every npm ci and every target
# that starts node (_tools/check-node.sh).
NODE_MAJOR  := 20
# FUNCTIONS: the deployment's functions, rendered from internal/deploy.
include internal/deploy/functions.mk
BUILD_DIR   := build
TOOLS_DIR   := _tools
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
APIDIFF     := golang.org/x/exp/cmd/apidiff@v0.0.0-20261009195045-ca0d7ba23607
# The packages a team codes against: apidiff compares each with api/BASELINE.
# Each is <module directory>:<package directory>; the construct is in the
# module infra.
API_PACKAGES := .:pkg/jobs .:pkg/jobs/driver .:pkg/jobs/jobstest .:pkg/jobs/lambdafn .:pkg/jobs/httpapi .:pkg/jobs/dynamostore .:pkg/jobs/s3objects .:pkg/jobs/sqsqueue .:pkg/jobs/schedulerapi .:pkg/jobs/eventbus .:pkg/jobs/lambdafn/tracing .:pkg/jobs/lambdafn/tracing/otlp infra:jobsinfra
# The module of the tests and tools a team's module must not inherit (the
# dashboard's browser tests, the YAML reader of docs/reference/openapi.yaml, the
# module proxy of the modules test): see docs/guide/MODULES.md.
DEVTOOLS    := internal/devtools
FUZZTIME    ?= 10s
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE         := bin/aws-lambda-rie
HOST_ARCH   := $(shell $(GO) env GOARCH)
# NOTRACING=1 builds the bootstraps without OpenTelemetry (smaller, faster
# to start; they refuse JOBS_TRACING=on): see internal/withtracing.
NOTRACING   ?=
comma       := ,
BUILD_TAGS  := lambda.norpc$(if $(NOTRACING),$(comma)lambdajobs.notracing)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# npm ci installs exactly the lockfile, each package checked against its
# integrity hash; --ignore-scripts: no package of either lockfile has an
# install script (internal/dev/supplychain checks this), so none may run one.
NPM_CI := npm ci --ignore-scripts --no-audit --no-fund --loglevel=error

.PHONY: check-node
check-node: ## Fail unless the node on PATH is Node.js NODE_MAJOR (and its npm reads the lockfiles).
	@bash $(TOOLS_DIR)/check-node.sh $(NODE_MAJOR)

.PHONY: toolchains
toolchains: check-node ## Fail unless go runs the pinned Go release (GO_RELEASE), every go.mod agrees with it, and node is Node.js NODE_MAJOR.
	@v=$$($(GO) env GOVERSION) || exit 1; \
	if [ "$$v" != "$(GO_RELEASE)" ]; then echo "go runs $$v, but the Makefile pins $(GO_RELEASE) (GOTOOLCHAIN=$(GO_RELEASE)): do not override GOTOOLCHAIN, and use Go 1.21 or later, which fetches the pinned release"; exit 1; fi; \
	echo "$$v (pinned: GO_RELEASE=$(GO_RELEASE))"
	$(GO) test -count=1 -run '^TestGoModsAgreeWithTheMakefile$$' ./internal/dev/supplychain

$(TOOLS_DIR)/node_modules/.installed: $(TOOLS_DIR)/package.json $(TOOLS_DIR)/package-lock.json
	@bash $(TOOLS_DIR)/check-node.sh $(NODE_MAJOR)
	$(NPM_CI) --prefix $(TOOLS_DIR)
	@touch $@

.PHONY: deps
deps: check-node $(TOOLS_DIR)/node_modules/.installed ## Install the pinned emulators (DynamoDB Local, fauxqs) from _tools/package-lock.json.
	GOWORK=off $(GO) mod download

.PHONY: build
build: ## Cross-compile the seven Lambda bootstraps (provided.al2023, arm64) into build/<function>/bootstrap (NOTRACING=1: without OpenTelemetry).
	@for f in $(FUNCTIONS); do \
		mkdir -p $(BUILD_DIR)/$$f; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags $(BUILD_TAGS) \
			-ldflags='-s -w -buildid=' -o $(BUILD_DIR)/$$f/bootstrap ./functions/$$f || exit 1; \
		echo "built $(BUILD_DIR)/$$f/bootstrap ($$(du -h $(BUILD_DIR)/$$f/bootstrap | cut -f1))"; \
	done

# The dashboard's browser tests drive Debian's chromium (no browser
# download is possible): installed here when missing, as root or with sudo,
# after saying which packages and versions apt-get installs system-wide.
# Pinned to CHROMIUM_VERSION when set; else to the version Debian offers
# at the time, at least CHROMIUM_MIN_MAJOR (Debian's security archive
# keeps only its newest chromium, so a fixed pin would stop installing
# when it moves on): see _tools/apt-install.sh.
CHROMIUM_VERSION   ?=
CHROMIUM_MIN_MAJOR := 150

.PHONY: chromium
chromium: ## Install Debian's chromium for the dashboard's browser tests when missing, saying first what apt-get installs system-wide.
	@bash $(TOOLS_DIR)/apt-install.sh chromium chromium $(CHROMIUM_MIN_MAJOR) $(CHROMIUM_VERSION)

# Where the end-to-end and reliability runs record every AWS call the
# deployment's principals make (package internal/dev/iamcalls); make
# infra-test evaluates them against the synthesized policies, and make
# test, once they are all recorded, checks each is among its role's grants
# in internal/deploy (RECORDED_CALLS_TEST: left out of the run that
# records them, which it would read half written).
IAM_CALLS := $(CURDIR)/$(BUILD_DIR)/iam-calls
RECORDED_CALLS_TEST := TestEveryRecordedCallIsAmongItsRolesGrants
# The packages that start whole local stacks (emulators, functions under
# the Runtime Interface Emulator): make test runs them one at a time.
E2E_PACKAGES := /internal/dev/(integration|localstack|partitions|reliability)$$

.PHONY: test
test: deps $(RIE) chromium ## Run every test (unit, integration on DynamoDB Local and fauxqs, end-to-end on the local stack) with -race; records the AWS calls make infra-test evaluates.
	$(GO) vet ./...
	rm -rf $(IAM_CALLS)
	LAMBDAJOBS_IAM_CALLS=$(IAM_CALLS) $(GO) test -race -count=1 -timeout 15m -skip '^$(RECORDED_CALLS_TEST)$$' $$($(GO) list ./... | grep -vE '$(E2E_PACKAGES)')
	@echo "== the local stacks' packages, one at a time (two at once overload 2 cores: a worker's writes pass their deadlines)"
	LAMBDAJOBS_IAM_CALLS=$(IAM_CALLS) $(GO) test -race -count=1 -timeout 20m -p 1 $$($(GO) list ./... | grep -E '$(E2E_PACKAGES)')
	@echo "== $(DEVTOOLS): the dashboard in chromium, the OpenAPI copy, the modules a team resolves"
	cd $(DEVTOOLS) && $(GO) vet ./... && LAMBDAJOBS_IAM_CALLS=$(IAM_CALLS) $(GO) test -race -count=1 -timeout 15m ./...
	@echo "== every recorded AWS call is among its role's grants (internal/deploy)"
	LAMBDAJOBS_IAM_CALLS=$(IAM_CALLS) $(GO) test -count=1 -run '^$(RECORDED_CALLS_TEST)$$' -v ./internal/deploy
	@echo "== examples/quickstart: a team's own module (its kind, its main, on the local stack)"
	cd examples/quickstart && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

.PHONY: lint
lint: toolchains ## The pinned toolchains, gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd $(DEVTOOLS) && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

.PHONY: tidy
tidy: ## go mod tidy in every module of go.work (the library and the construct, required at their coming release, read from this tree), then check the result.
	cd $(DEVTOOLS) && $(GO) test -count=1 -run '^TestEveryModuleIsTidy$$' ./modules -update
	cd $(DEVTOOLS) && $(GO) test -count=1 -run '^TestEveryModuleIsTidy$$' ./modules

.PHONY: openapi-json
openapi-json: ## Write docs/reference/openapi.yaml as JSON to pkg/jobs/httpapi/testdata/openapi.json, which the contract tests read.
	cd $(DEVTOOLS) && $(GO) test -count=1 -run '^TestHTTPAPISpecIsTheYAML$$' ./openapi -update

.PHONY: apidiff
apidiff: ## Report each change of the public Go API against the baseline commit in api/BASELINE; fail on one that breaks a caller.
	@base=$$(cat api/BASELINE); dir=$$(mktemp -d); \
	git worktree add --detach -q $$dir/base $$base || exit 1; \
	trap 'git worktree remove --force '$$dir'/base; rm -rf '$$dir EXIT; \
	fail=0; for mp in $(API_PACKAGES); do \
	  m=$${mp%%:*}; p=$${mp#*:}; \
	  path=$$(sed -n 's/^module //p' $$m/go.mod)/$$p; \
	  f=$$dir/$$(echo $$m/$$p | tr ./ __).export; \
	  if [ ! -d $$dir/base/$$m/$$p ]; then echo "== $$path: new since the baseline"; continue; fi; \
	  (cd $$dir/base/$$m && $(GO) run $(APIDIFF) -w $$f $$path) || exit 1; \
	  out=$$(cd $$m && $(GO) run $(APIDIFF) $$f $$path) || exit 1; \
	  if [ -n "$$out" ]; then echo "== $$path"; echo "$$out"; fi; \
	  case "$$out" in *Incompatible*) fail=1;; esac; \
	done; \
	if [ $$fail = 1 ]; then echo "apidiff: a change above breaks callers of the API recorded in api/BASELINE ($$base)"; fi; exit $$fail

.PHONY: release
release: ## Tag every module of the repository at VERSION (such as v0.1.0) on the commit checked out, once make apidiff passes (docs/guide/MODULES.md, "Releasing").
	@test -n "$(VERSION)" || { echo "release: give VERSION, such as make release VERSION=v0.1.0"; exit 1; }
	$(MAKE) apidiff
	cd $(DEVTOOLS) && $(GO) run ./cmd/release -root $(CURDIR) -version $(VERSION)

.PHONY: bench
bench: deps $(RIE) build-local ## Measure cost per job, overhead, throughput, cold start and sweeper cost; writes docs/evidence/BENCHMARKS.md and its plot.
	@mkdir -p $(BUILD_DIR)/bench
	$(GO) test -run '^$$' -bench Overhead -benchtime 300x -count 10 ./internal/dev/benchmarks/ | tee $(BUILD_DIR)/bench/overhead.txt
	$(GO) test -run '^$$' -bench ClaimExpression -benchmem -count 5 ./pkg/jobs/dynamostore/ | tee -a $(BUILD_DIR)/bench/overhead.txt
	cd bench && $(GO) run . -out ../docs/evidence -overhead ../$(BUILD_DIR)/bench/overhead.txt

.PHONY: fuzz
# CI gives each target a number of executions (FUZZTIME=30000x), not a
# duration: with a duration, Go 1.26's fuzzing coordinator can report a
# spurious "context deadline exceeded" failure at the deadline, with no
# failing input (go.dev/issue/75804, fixed in Go 1.27); a count has no
# deadline to race.
fuzz: ## Run each fuzz target for FUZZTIME (default 10s; try FUZZTIME=10m; CI gives counts of executions).
	$(GO) test -run '^$$' -fuzz '^FuzzDecodePayload$$' -fuzztime $(FUZZTIME) ./pkg/jobs
	$(GO) test -run '^$$' -fuzz '^FuzzRouteForeignMessage$$' -fuzztime $(FUZZTIME) ./pkg/jobs
	$(GO) test -run '^$$' -fuzz '^FuzzEnqueue$$' -fuzztime $(FUZZTIME) ./pkg/jobs/httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzParseUpdate$$' -fuzztime $(FUZZTIME) ./internal/dev/partitions
	$(GO) test -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(FUZZTIME) ./internal/jsonin
	$(GO) test -run '^$$' -fuzz '^FuzzMessageSort$$' -fuzztime $(FUZZTIME) ./internal/wire

.PHONY: reliability
reliability: deps $(RIE) ## Run the reliability scenarios at full size (faults, SIGKILL, one owner at a scaled 10,000 jobs/s) and rewrite docs/evidence/RELIABILITY.md and docs/evidence/KEY_HEAT.md.
	RELIABILITY_REPORT=$(CURDIR)/docs/evidence/RELIABILITY.md $(GO) test -count=1 -v -timeout 20m -run . ./internal/dev/reliability/

.PHONY: simulate
SEEDS ?= 10000
simulate: ## Run SEEDS seeds of the whole-system simulator (default 10000) with -race and write their figures to docs/evidence/simulation-figures.md.
	$(GO) test -race -count=1 -timeout 60m -run 'TestSimulation$$' ./internal/dev/simulation/ -seeds $(SEEDS) -report $(CURDIR)/docs/evidence/simulation-figures.md

# govulncheck needs no network: the vulnerability database is built from the
# golang.org/x/vulndb module (served by the module proxy) into a cache.
# make vulncheck states the database's age (its pseudo-version's date) and
# fails when it is older than VULNDB_MAX_AGE_DAYS: then move VULN_VERSION
# to the newest version the proxy serves.
VULN_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB_MAX_AGE_DAYS := 90
VULN_DB      := $(HOME)/.cache/lambdajobs/vulndb-$(VULN_VERSION)

$(VULN_DB)/index/db.json:
	@src=$$($(GO) mod download -json golang.org/x/vulndb@$(VULN_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); \
	test -n "$$src" || { echo "cannot download golang.org/x/vulndb"; exit 1; }; \
	rm -rf $(VULN_DB).tmp && mkdir -p $(VULN_DB).tmp && \
	$(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULN_VERSION) -vulns $$src/data/osv -out $(VULN_DB).tmp && \
	rm -rf $(VULN_DB) && mv $(VULN_DB).tmp $(VULN_DB)

.PHONY: vulncheck
GOVULNCHECK := golang.org/x/vuln/cmd/govulncheck@v1.9.0
MODULES     := . infra bench $(DEVTOOLS) examples/quickstart examples/quickstart/infra

vulncheck: $(VULN_DB)/index/db.json ## govulncheck of every module against an offline copy of the Go vulnerability database, no older than VULNDB_MAX_AGE_DAYS.
	@bash $(TOOLS_DIR)/vulndb-age.sh $(VULN_VERSION) $(VULNDB_MAX_AGE_DAYS)
	@for m in $(MODULES); do echo "== govulncheck $$m"; (cd $$m && $(GO) run $(GOVULNCHECK) -db file://$(VULN_DB) ./...) || exit 1; done

.PHONY: cli
cli: ## Build the ljob CLI into bin/ljob, and its MCP server (ljob mcp) into bin/ljob-mcp.
	$(GO) build -o bin/ljob ./cmd/ljob
	cd $(DEVTOOLS) && $(GO) build -o $(CURDIR)/bin/ljob-mcp ./cmd/ljob-mcp

# The CDK app (infra/, its own Go module). Offline: no notices, telemetry or
# version checks. Node 20 is past its end of life for jsii; it works.
ENV      ?= dev
# Where alarms go; required for an environment that retains data (prod).
ALARM_EMAIL ?=
# The account and region an environment that retains data is pinned to
# (or CDK_DEFAULT_ACCOUNT and CDK_DEFAULT_REGION).
ACCOUNT ?=
REGION  ?=
# The base of the physical names (schedule groups, dashboard, API, metrics)
# instead of one derived from the stack (jobsinfra.Names).
NAME_PREFIX ?=
# MESSAGE_FIRST=false deploys with the message first off (docs/operations/DEPLOY.md,
# "Turning on the message first"); unset, it is on.
MESSAGE_FIRST ?=
# TAG_INDEXES=1 (then 2) declares only that many tag indexes: the first
# deploys of a stack from before tags (docs/operations/DEPLOY.md, "Adding the tag
# indexes"); unset, all.
TAG_INDEXES ?=
CDK_CTX  := $(if $(ALARM_EMAIL),-c alarmEmail=$(ALARM_EMAIL)) $(if $(ACCOUNT),-c account=$(ACCOUNT)) $(if $(REGION),-c region=$(REGION)) $(if $(NAME_PREFIX),-c namePrefix=$(NAME_PREFIX)) $(if $(MESSAGE_FIRST),-c messageFirst=$(MESSAGE_FIRST)) $(if $(TAG_INDEXES),-c tagIndexes=$(TAG_INDEXES))
CDK_ENV  := CDK_DISABLE_VERSION_CHECK=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
CDK      := $(CDK_ENV) $(CURDIR)/infra/_tools/node_modules/.bin/cdk

infra/_tools/node_modules/.installed: infra/_tools/package.json infra/_tools/package-lock.json
	@bash $(TOOLS_DIR)/check-node.sh $(NODE_MAJOR)
	$(NPM_CI) --prefix infra/_tools
	@touch $@

.PHONY: infra-test
infra-test: check-node infra/_tools/node_modules/.installed ## Test the CDK app: template assertions, cdk-nag AwsSolutions, and every AWS call make test recorded evaluated against the synthesized policies (run make test first).
	cd infra && $(GO) vet ./... && LAMBDAJOBS_IAM_CALLS=$(IAM_CALLS) $(CDK_ENV) $(GO) test -count=1 ./...
	cd examples/quickstart/infra && $(GO) vet ./... && $(CDK_ENV) $(GO) test -count=1 ./...

.PHONY: synth
synth: check-node build infra/_tools/node_modules/.installed ## Synthesize the stack of ENV (default dev) into infra/cdk.out, offline, cdk-nag enforced.
	cd infra && $(CDK) synth -c env=$(ENV) $(CDK_CTX) --quiet
	@echo "synthesized lambdajobs-$(ENV) into infra/cdk.out"

.PHONY: quickstart-synth
quickstart-synth: check-node infra/_tools/node_modules/.installed ## Build examples/quickstart's bootstrap and synthesize its CDK app (dev and prod) with the CDK CLI, cdk-nag enforced.
	$(MAKE) -C examples/quickstart build
	cd examples/quickstart/infra && ALARM_EMAIL=$(or $(ALARM_EMAIL),oncall@example.com) $(CDK) synth --quiet
	@echo "synthesized reports-dev and reports-prod into examples/quickstart/infra/cdk.out"

.PHONY: cfn-lint
cfn-lint: ## cfn-lint every synthesized template (after make synth and make quickstart-synth). W3005 is ignored: CDK emits DependsOn that its references already imply.
	@command -v cfn-lint >/dev/null || { echo "cfn-lint is required (part of these machines' image; pip install cfn-lint elsewhere)"; exit 1; }
	cfn-lint --ignore-checks W3005 -- infra/cdk.out/*.template.json examples/quickstart/infra/cdk.out/*.template.json

.PHONY: deploy
deploy: check-node build infra/_tools/node_modules/.installed ## Deploy the stack of ENV to the AWS account of your credentials (see README "Deploy").
	cd infra && $(CDK) deploy -c env=$(ENV) $(CDK_CTX) --require-approval broadening

.PHONY: clean
clean: ## Remove build outputs and installed tools (bin/).
	rm -rf $(BUILD_DIR) bin infra/cdk.out

$(RIE):
	GOBIN=$(CURDIR)/bin $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: build-local
build-local: ## Build the seven bootstraps for this machine (linux, host arch) into build/local, for the local stack.
	@for f in $(FUNCTIONS); do \
		mkdir -p $(BUILD_DIR)/local/$$f; \
		GOOS=linux GOARCH=$(HOST_ARCH) CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags $(BUILD_TAGS) \
			-ldflags='-s -w -buildid=' -o $(BUILD_DIR)/local/$$f/bootstrap ./functions/$$f || exit 1; \
	done

.PHONY: run
run: deps $(RIE) build-local ## Run the whole system locally: API on 127.0.0.1:8080, DynamoDB Local on :8000, fauxqs on :4566.
	$(GO) build -o bin/lambdajobs-local ./cmd/lambdajobs-local
	exec bin/lambdajobs-local
