# syntax=docker/dockerfile:1
# A static widget-operator on scratch. The module has no dependencies, so
# the build downloads nothing.
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t widget-operator .
#
# GO_IMAGE may name any image with a Go 1.26 toolchain on its PATH.
ARG GO_IMAGE=golang:1.26-alpine

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
WORKDIR /src
COPY go.mod ./
COPY cmd/ cmd/
COPY internal/ internal/
COPY k8sapi/ k8sapi/
COPY queue/ queue/
COPY reconcile/ reconcile/
COPY watch/ watch/
ENV CGO_ENABLED=0 GOPROXY=off GOTOOLCHAIN=local
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -buildid= -X github.com/zerodep-k8s/widget-operator/k8sapi.Version=${VERSION}" \
      -o /out/widget-operator ./cmd/widget-operator

FROM scratch
COPY --from=build /out/widget-operator /widget-operator
USER 65532:65532
ENTRYPOINT ["/widget-operator"]
