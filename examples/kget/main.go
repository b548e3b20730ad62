// Command kget gets, lists or watches any kind of object, found by the
// names kubectl accepts (through discovery), using the current kubeconfig:
//
//	kget [-n NAMESPACE] [-A] [-w] [-o json|name] KIND [NAME]
//
// and reads, runs in or forwards to pods, as kubectl does (pods.go):
//
//	kget [-n NAMESPACE] logs [-f] POD
//	kget [-n NAMESPACE] exec [-i] [-t] POD -- COMMAND [ARG...]
//	kget [-n NAMESPACE] port-forward POD [LOCAL:]REMOTE...
//
// It is an example of k8sapi, k8sapi/discovery and k8sapi/namespaced's
// iterators, and of k8sapi/podlogs, podexec and portforward, on the
// standard library alone.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/discovery"
	"github.com/zerodep-k8s/widget-operator/k8sapi/namespaced"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runStdin(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = "usage: kget [-kubeconfig FILE] [-context NAME] [-n NAMESPACE] [-A] [-w] [-o json|name] KIND [NAME]"

// run is main without the process: it returns the exit code, 2 for bad
// usage and 1 for a failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kget", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means $KUBECONFIG, in-cluster, ~/.kube/config")
	kubecontext := fs.String("context", "", "kubeconfig context; empty means the current one")
	namespace := fs.String("n", "", "namespace; empty means the kubeconfig context's")
	all := fs.Bool("A", false, "all namespaces")
	watch := fs.Bool("w", false, "after listing or getting, watch for changes")
	output := fs.String("o", "name", "output: json or name")
	if err := fs.Parse(args); err != nil || fs.NArg() < 1 || fs.NArg() > 2 ||
		(*output != "json" && *output != "name") || (*all && fs.NArg() == 2) {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	kind, name := fs.Arg(0), fs.Arg(1)
	if err := get(ctx, stdout, *kubeconfig, *kubecontext, *namespace, *all, *watch, *output, kind, name); err != nil {
		fmt.Fprintf(stderr, "kget: %v\n", err)
		return 1
	}
	return 0
}

func get(ctx context.Context, out io.Writer, kubeconfig, kubecontext, namespace string, all, watch bool, output, kind, name string) error {
	c, m, err := resolve(ctx, kubeconfig, kubecontext, kind)
	if err != nil {
		return err
	}
	switch {
	case all:
		namespace = ""
	case namespace == "":
		namespace = c.Namespace()
	}
	p := printer{w: out, json: output == "json", prefix: m.Singular, kind: m.Kind, apiVersion: m.GroupVersion()}
	if m.Group != "" {
		p.prefix += "." + m.Group
	}
	objects := namespaced.In(k8sapi.For[json.RawMessage](c, m.Resource), namespace)
	if name != "" && !watch {
		obj, err := objects.Get(ctx, name, k8sapi.GetOptions{})
		if err != nil {
			return err
		}
		return p.object(*obj)
	}
	var opts k8sapi.ListOptions
	if name != "" {
		// One object to watch: a list and a watch filtered to it.
		opts.FieldSelector = "metadata.name=" + name
	}
	list, err := objects.ListAll(ctx, opts)
	if err != nil {
		return err
	}
	if !watch {
		return p.list(list.Items)
	}
	opts.ResourceVersion = list.Metadata.ResourceVersion
	return p.follow(ctx, objects, list.Items, opts)
}

// resolve connects to the cluster of the kubeconfig and context, and
// finds the resource that kind names, as kubectl would.
func resolve(ctx context.Context, kubeconfig, kubecontext, kind string) (*k8sapi.Client, discovery.Mapping, error) {
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: kubeconfig, Context: kubecontext})
	if err != nil {
		return nil, discovery.Mapping{}, err
	}
	c, err := k8sapi.New(cfg)
	if err != nil {
		return nil, discovery.Mapping{}, err
	}
	d, err := discovery.New(discovery.Config{Client: c})
	if err != nil {
		return nil, discovery.Mapping{}, err
	}
	m, err := d.Resolve(ctx, kind)
	return c, m, err
}

// follow writes items, a list, as ADDED events, then the changes that
// objects's watch from opts brings, until ctx ends.
func (p printer) follow(ctx context.Context, objects namespaced.Handle[json.RawMessage], items []json.RawMessage, opts k8sapi.ListOptions) error {
	for _, item := range items {
		if err := p.event(k8sapi.Added, item); err != nil {
			return err
		}
	}
	for ev, err := range objects.Events(ctx, opts) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		if err := p.event(ev.Type, ev.Object); err != nil {
			return err
		}
	}
	return nil
}

// printer writes objects as JSON or as kind/name.
type printer struct {
	w      io.Writer
	json   bool
	prefix string // "deployment.apps", as kubectl names objects
	// kind and apiVersion are set on list items, which the server sends
	// without them.
	kind, apiVersion string
}

// typed returns obj with its kind and apiVersion.
func (p printer) typed(obj json.RawMessage) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return nil, err
	}
	if _, ok := fields["kind"]; ok {
		return obj, nil
	}
	fields["kind"], _ = json.Marshal(p.kind)
	fields["apiVersion"], _ = json.Marshal(p.apiVersion)
	return json.Marshal(fields)
}

func (p printer) name(obj json.RawMessage) (string, error) {
	var o struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		return "", err
	}
	return p.prefix + "/" + o.Metadata.Name, nil
}

func (p printer) object(obj json.RawMessage) error {
	if p.json {
		_, err := fmt.Fprintf(p.w, "%s\n", obj)
		return err
	}
	n, err := p.name(obj)
	if err == nil {
		_, err = fmt.Fprintln(p.w, n)
	}
	return err
}

func (p printer) list(items []json.RawMessage) error {
	if !p.json {
		for _, obj := range items {
			if err := p.object(obj); err != nil {
				return err
			}
		}
		return nil
	}
	typed := []json.RawMessage{}
	for _, obj := range items {
		t, err := p.typed(obj)
		if err != nil {
			return err
		}
		typed = append(typed, t)
	}
	b, err := json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}{"v1", "List", typed})
	if err == nil {
		_, err = fmt.Fprintf(p.w, "%s\n", b)
	}
	return err
}

// event writes one change: "TYPE kind/name", or a JSON watch event.
func (p printer) event(t k8sapi.EventType, obj json.RawMessage) error {
	if p.json {
		obj, err := p.typed(obj)
		if err != nil {
			return err
		}
		b, err := json.Marshal(struct {
			Type   k8sapi.EventType `json:"type"`
			Object json.RawMessage  `json:"object"`
		}{t, obj})
		if err == nil {
			_, err = fmt.Fprintf(p.w, "%s\n", b)
		}
		return err
	}
	n, err := p.name(obj)
	if err != nil {
		return errors.Join(errors.New("malformed object"), err)
	}
	_, err = fmt.Fprintf(p.w, "%s %s\n", t, n)
	return err
}
