// Command floor is the raw-write floor of the benchmarks (bench.Floor): it
// reads the Widgets from a JSON file, pushes the three writes an operator
// makes for each new Widget (create its Deployment, create its Service,
// patch its status) with a few goroutines, and exits. It has no list, no
// watch and no cache, and links only k8sapi and widget, so that its CPU
// and memory are those of the writes alone.
//
//	floor -kubeconfig KC -widgets widgets.json [-workers 4]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the identity to write as")
	file := flag.String("widgets", "", "JSON file of the Widgets, as created")
	workers := flag.Int("workers", 4, "concurrent writers")
	flag.Parse()
	if err := run(*kubeconfig, *file, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, file string, workers int) error {
	if kubeconfig == "" || file == "" || workers <= 0 {
		return errors.New("-kubeconfig and -widgets are required, -workers must be positive")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var widgets []*widget.Widget
	if err := json.Unmarshal(data, &widgets); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: kubeconfig})
	if err != nil {
		return err
	}
	c, err := k8sapi.New(cfg)
	if err != nil {
		return err
	}
	return write(context.Background(), c, widgets, workers)
}

// write makes the three writes of every Widget in widgets, with workers
// goroutines, and returns the first error.
func write(ctx context.Context, c *k8sapi.Client, widgets []*widget.Widget, workers int) error {
	deploys := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
	services := k8sapi.For[k8sapi.Service](c, k8sapi.Services)
	status := k8sapi.For[widget.Widget](c, widget.Widgets)
	create := k8sapi.WriteOptions{FieldManager: widget.FieldManager}
	one := func(w *widget.Widget) error {
		var d k8sapi.Deployment
		if err := convert(widget.DesiredDeployment(w), &d); err != nil {
			return err
		}
		got, err := deploys.Create(ctx, w.Namespace, &d, create)
		if err != nil {
			return err
		}
		var s k8sapi.Service
		if err := convert(widget.DesiredService(w), &s); err != nil {
			return err
		}
		if _, err := services.Create(ctx, w.Namespace, &s, create); err != nil {
			return err
		}
		patch, err := widget.StatusPatch(widget.StatusFor(w, got, nil, time.Now()))
		if err != nil {
			return err
		}
		_, err = status.Patch(ctx, w.Namespace, w.Name, k8sapi.MergePatch, patch,
			k8sapi.PatchOptions{FieldManager: widget.FieldManager, Subresource: "status"})
		return err
	}
	next := make(chan *widget.Widget)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for w := range next {
				if err := one(w); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %w", w.Name, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, w := range widgets {
		next <- w
	}
	close(next)
	wg.Wait()
	return first
}

// convert turns an apply configuration into the object to create.
func convert(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}
