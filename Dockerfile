# syntax=docker/dockerfile:1
# A static widget-operator on scratch: the image holds the binary and
# nothing else (no shell, no CA bundle: in a pod the operator trusts the
# service-account CA, /var/run/secrets/kubernetes.io/serviceaccount/ca.crt).
# The module has no dependencies, so the build downloads nothing.
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t widget-operator:dev .
#
# The build stage runs on the build machine's platform and cross-compiles
# for the target's (TARGETOS/TARGETARCH), so no emulation is needed.
#
# GO_IMAGE may name any image with a Go 1.26 toolchain on its PATH and a
# /bin/sh. Without access to a registry, make one from the local toolchain
# (go run ./hack/image) and pass
# --build-arg GO_IMAGE=localhost/widget-go-builder:1.26.
#
# The default is pinned by digest, so that a tag moved in the registry
# cannot change what builds the binary: golang:1.26.8-alpine, the
# multi-arch index, the toolchain the project is tested with (go1.26.8).
# The digest was taken from public Dockerfiles that pin this tag (checked
# current in October 2026), not read from the registry by this project's
# CI, which has no registry access; confirm it with
#   docker buildx imagetools inspect golang:1.26.8-alpine
# and move tag and digest together. The final stage is scratch: nothing
# else to pin.
ARG GO_IMAGE=golang:1.26.8-alpine@sha256:8ac98ca534ac3f51e1f420a1dd2c15e74c75cfa0f23f3ad27eb5d7236c349a0c

# The release image of `make image` (--target release): the binary that
# `make build` made in a git clone, which records the commit, and that
# `make sbom` describes in bin/widget-operator.spdx.json and
# .provenance.json, byte for byte. See SECURITY.md, "Verifying a release".
# The stages below build from the sources alone instead: their binary has
# no VCS stamp, since the build context's .git is not copied in.
FROM scratch AS release
COPY bin/widget-operator /widget-operator
USER 65532:65532
ENTRYPOINT ["/widget-operator"]

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
# Set by the builder from --platform; empty means the build machine's.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod ./
COPY cmd/ cmd/
COPY events/ events/
COPY internal/ internal/
COPY k8sapi/ k8sapi/
COPY manager/ manager/
COPY metrics/ metrics/
COPY queue/ queue/
COPY reconcile/ reconcile/
COPY watch/ watch/
COPY widget/ widget/
# GOPROXY=off: a missing module is an error, never a download. The build
# cache lives in a cache mount, so that a rebuild compiles only what
# changed; the output does not depend on it.
ENV CGO_ENABLED=0 GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOCACHE=/root/.cache/go-build
RUN --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -buildid= -X main.Version=${VERSION}" \
      -o /out/widget-operator ./cmd/widget-operator

FROM scratch
COPY --from=build /out/widget-operator /widget-operator
USER 65532:65532
ENTRYPOINT ["/widget-operator"]
