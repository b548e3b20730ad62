package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// FloorName labels the results of the raw-write floor.
const FloorName = "raw-write floor"

// FloorWorkers is the floor's concurrency: the operators' worker count.
const FloorWorkers = 4

// Floor is the raw-write floor: no binary, run in the bench's own process
// as the operator's ServiceAccount (the permissions of manifests/rbac). It
// pushes the three writes an operator makes for each new Widget (create
// its Deployment, create its Service, patch its status) with
// FloorWorkers goroutines, and nothing else: no list, no watch, no cache.
// It knows the Widgets from their creation. Its time to converge is how
// fast this API server takes the writes alone; what an operator takes
// beyond it is the operator's own cost.
func Floor() Operator {
	return Operator{Name: FloorName, Namespace: "widget-system", ServiceAccount: "widget-operator"}
}

// floor makes the three writes of every Widget in widgets, with workers
// goroutines, and returns the first error.
func floor(ctx context.Context, c *k8sapi.Client, widgets []*widget.Widget, workers int) error {
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
						first = fmt.Errorf("bench: floor: %s: %w", w.Name, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, w := range widgets {
		select {
		case next <- w:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
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
