// Command floor is the raw-write floor of the benchmarks (bench.Floor): it
// reads the Widgets from a JSON file, pushes the three writes an operator
// makes for each new Widget (create its Deployment, create its Service,
// patch its status) with a few goroutines, then creates the file -done
// and waits for SIGTERM or SIGINT, so that the bench can read its CPU and
// peak RSS from /proc as it does an operator's. It has no list, no watch
// and no cache, and links only k8sapi and widget, so that its CPU and
// memory are those of the writes alone. A failed write ends it at once,
// with status 1.
//
//	floor -kubeconfig KC -widgets widgets.json -done FILE [-workers 4]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the identity to write as")
	file := flag.String("widgets", "", "JSON file of the Widgets, as created")
	done := flag.String("done", "", "file to create once every write has its answer")
	workers := flag.Int("workers", 4, "concurrent writers")
	flag.Parse()
	if err := run(*kubeconfig, *file, *done, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, file, done string, workers int) error {
	if kubeconfig == "" || file == "" || done == "" || workers <= 0 {
		return errors.New("-kubeconfig, -widgets and -done are required, -workers must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
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
	if err := write(ctx, c, widgets, workers); err != nil {
		return err
	}
	if err := os.WriteFile(done, nil, 0o600); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
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
