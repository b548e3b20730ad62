module github.com/zerodep-k8s/widget-operator

go 1.26
