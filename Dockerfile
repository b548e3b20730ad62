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
ARG GO_IMAGE=golang:1.26-alpine

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
# Set by the builder from --platform; empty means the build machine's.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod ./
COPY cmd/ cmd/
COPY internal/ internal/
COPY k8sapi/ k8sapi/
COPY queue/ queue/
COPY reconcile/ reconcile/
COPY watch/ watch/
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
