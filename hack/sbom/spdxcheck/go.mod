module github.com/zerodep-k8s/widget-operator/hack/sbom/spdxcheck

go 1.26.0

require github.com/spdx/tools-golang v0.5.7

require github.com/anchore/go-struct-converter v0.1.0 // indirect
