// The examples are a module of their own, outside this repository's import
// path, as a tool author's module would be: the compiler lets them import
// no internal package of the kit, and they link nothing but the standard
// library and the kit (make deps checks both).
module example.com/examples

go 1.26

require github.com/zerodep-k8s/widget-operator v0.0.0

replace github.com/zerodep-k8s/widget-operator => ../
