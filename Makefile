# widget-operator: every developer and CI command starts here.
# `make test` runs every test; `make run` runs the operator.

GO        ?= go
MODULE    := github.com/zerodep-k8s/widget-operator
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -buildid= -X main.Version=$(VERSION)
BIN       := bin/widget-operator
IMAGE     ?= widget-operator:$(VERSION)
# Fuzzing runs for a count of executions, not a duration: with a duration,
# Go 1.26's fuzzing coordinator can report a spurious "context deadline
# exceeded" when the time runs out (go.dev/issue/75804, fixed in Go 1.27).
FUZZTIME  ?= 50000x
# Each fuzz target runs for FUZZTIME in `make test`: package:FuzzName.
FUZZ_TARGETS ?= ./queue:FuzzQueue ./k8sapi/internal/yaml:FuzzParse ./k8sapi:FuzzLoadKubeconfig \
                ./k8sapi:FuzzWatchDecode ./k8sapi:FuzzStringMap ./reconcile:FuzzWidgetDecode \
                ./k8sapi/internal/websocket:FuzzReadFrames \
                ./manager/webhook:FuzzReviewDecode

export GOTOOLCHAIN := local

.PHONY: all build sbom run image bench bench-quota bench-webhook test check fmt vet deps controlplane container-deps unit fuzz mutate lines clean

all: build

# -buildvcs=auto records the commit (vcs.revision, vcs.time, vcs.modified)
# in a git clone, the same for two clones of one commit, and builds without
# it elsewhere (an unpacked archive; a git worktree, which go does not read).
GOBUILD    = CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/widget-operator

build:
	$(GOBUILD)

## sbom: the binary's SBOM (SPDX 2.3) and provenance (in-toto, SLSA v1),
## next to it: $(BIN).spdx.json and $(BIN).provenance.json.
sbom: build
	$(GO) run ./hack/sbom -bin $(BIN) -command '$(GOBUILD)'

## run: the operator against the current kubeconfig's cluster, or against
## the local control plane when there is none (built on first use).
run: build
	$(GO) run ./hack/quickstart -operator=$(BIN)

## bench: unit benchmarks, sizes and the scale comparison with a
## controller-runtime operator; writes bench/results/<date>.*
bench: controlplane
	$(GO) run ./bench/cmd/compare

## bench-quota: the kit's quota operator beside the same operator written
## with controller-runtime at 1,000 labelled Namespaces; prints the table
## of docs/benchmarks.md ("The quota operator beside controller-runtime").
bench-quota: controlplane
	$(GO) run ./bench/cmd/quota

## bench-webhook: the latency of a conversion and of an admission call
## under 200 concurrent calls, the kit's webhook server (manager/webhook)
## beside controller-runtime's doing the same work; prints the table of
## docs/webhooks.md. Modules from the module cache or the Go proxy.
bench-webhook:
	cd bench/controller-runtime && GOFLAGS=-mod=mod $(GO) run ./webhook

## test: formatting, vet, the standard-library-only check, unit and
## control-plane tests under the race detector, then short fuzz runs.
test: check controlplane container-deps unit fuzz
	@echo "make test: all checks passed"

check: fmt vet deps

# gofmt walks the tree itself, so the check needs no git checkout and
# fails when gofmt cannot run.
fmt:
	@out=$$(gofmt -l .) || { echo "gofmt failed"; exit 1; }; \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi; \
	echo "fmt: $$(find . -name '*.go' -not -path './.git/*' | wc -l) files formatted"

vet:
	$(GO) vet ./...
	cd examples && $(GO) vet ./...

# The main module links the standard library and nothing else; the
# examples' module (examples/go.mod) links the standard library and the
# main module, through its replace to the repository's top folder. Its
# path is outside the main module's, so that the compiler refuses it any
# internal package, as it would another module's.
deps:
	@if grep -qE '^[[:space:]]*require' go.mod; then echo "go.mod has a require line"; exit 1; fi
	@bad=$$($(GO) list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... | grep -v '^$(MODULE)' || true); \
	if [ -n "$$bad" ]; then echo "non-standard packages linked:"; echo "$$bad"; exit 1; fi; \
	echo "deps: standard library only"
	@cd examples && case "$$($(GO) list -m)" in $(MODULE)|$(MODULE)/*) echo "examples: module path under $(MODULE)"; exit 1;; esac; \
	mods=$$($(GO) list -deps -test -f '{{if not .Standard}}{{.Module.Path}}{{end}}' ./...) || exit 1; \
	mods=$$(echo "$$mods" | sort -u | grep -vx -e '' -e '$(MODULE)' -e "$$($(GO) list -m)" || true); \
	if [ -n "$$mods" ]; then echo "examples: modules linked besides $(MODULE):"; echo "$$mods"; exit 1; fi; \
	echo "deps: examples link the standard library and $(MODULE) only"

# The local control plane's binaries (kube-apiserver, etcd, kwok...), built
# once from the Go module proxy into the user cache; seconds when warm.
controlplane:
	$(GO) run ./hack/localcluster build

# The container test (e2e/shipping) builds and runs the image with podman,
# on a builder image made from the local Go toolchain and a static busybox.
# It skips where podman is missing.
container-deps:
	@if command -v podman >/dev/null && command -v runc >/dev/null && dpkg -s busybox-static >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc busybox-static; \
	else echo "container-deps: cannot install podman here; the container test will skip"; fi

## image: the release image, offline with podman: the binary of `make
## build` alone, and as OCI annotations the commit and the SHA-256 of the
## binary, its SBOM and its provenance (make sbom), which stay in bin/.
## Dated by the commit, so that a rebuild of it gives the same digest.
image: sbom
	podman build --pull=never --layers=false --target release \
		--timestamp "$$(git log -1 --format=%ct)" \
		--annotation org.opencontainers.image.source=https://$(MODULE) \
		--annotation org.opencontainers.image.revision="$$(git rev-parse HEAD)" \
		--annotation org.opencontainers.image.version=$(VERSION) \
		--annotation io.widget-operator.binary.sha256="$$(sha256sum < $(BIN) | cut -d' ' -f1)" \
		--annotation io.widget-operator.spdx.sha256="$$(sha256sum < $(BIN).spdx.json | cut -d' ' -f1)" \
		--annotation io.widget-operator.provenance.sha256="$$(sha256sum < $(BIN).provenance.json | cut -d' ' -f1)" \
		-t $(IMAGE) .

unit:
	$(GO) test -race -count=1 -timeout 45m ./...
	cd examples && $(GO) test -race -count=1 -timeout 10m ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

## lines: the code linked into the operator binary, per package: non-test,
## non-blank, non-comment lines of Go. What a security team reads.
lines:
	@total=0; for d in $$($(GO) list -deps -f '{{if not .Standard}}{{.Dir}}{{end}}' ./cmd/widget-operator); do \
		n=$$(ls "$$d"/*.go | grep -v '_test\.go$$' | xargs cat | grep -cvE '^[[:space:]]*(//|$$)'); \
		total=$$((total + n)); printf '%6d  %s\n' "$$n" "$${d#$$PWD/}"; \
	done; printf '%6d  lines linked into cmd/widget-operator\n' "$$total"

## mutate: mutation testing of every package linked into the operator and of
## the kit's public packages, with their unit tests alone; prints a score per
## package and the survivors. Not part of make test (hours on 2 cores; pick
## packages with MUTATE_PKGS).
mutate:
	./hack/mutate/mutate.sh

clean:
	rm -rf bin
