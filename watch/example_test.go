package watch_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// An informer that keeps the Deployments of one namespace, trimmed to
// what the program reads, and logs their changes; its health is the
// program's readiness.
func ExampleNew() {
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	inf := watch.New(watch.Config[k8sapi.Deployment]{
		Source:    watch.ClientSource[k8sapi.Deployment](client, k8sapi.Deployments),
		Namespace: "shop",
		Transform: func(d *k8sapi.Deployment) { watch.TrimMeta(&d.ObjectMeta, "app") },
		Handler: watch.Handler[k8sapi.Deployment]{
			OnAdd:    func(d *k8sapi.Deployment) { log.Print("added ", d.Name) },
			OnUpdate: func(old, d *k8sapi.Deployment) { log.Print("updated ", d.Name) },
			OnDelete: func(d *k8sapi.Deployment) { log.Print("deleted ", d.Name) },
		},
	})
	http.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		switch err := inf.Healthy(time.Now()); {
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case !inf.HasSynced():
			http.Error(w, "deployments not listed yet", http.StatusServiceUnavailable)
		}
	})
	go http.ListenAndServe(":8081", nil)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	inf.Run(ctx)
}

// exampleSource stands in for an API server without streaming lists: its
// list holds one Deployment, its watch delivers what the example sends on
// events, and it refuses a streaming list, as such a server does.
type exampleSource struct {
	events chan k8sapi.WatchEvent[k8sapi.Deployment]
}

func (s exampleSource) List(ctx context.Context, ns string, opts k8sapi.ListOptions) (*k8sapi.List[k8sapi.Deployment], error) {
	return &k8sapi.List[k8sapi.Deployment]{Metadata: k8sapi.ListMeta{ResourceVersion: "1"},
		Items: []k8sapi.Deployment{exampleDeployment("1", 2)}}, nil
}

func (s exampleSource) Watch(ctx context.Context, ns string, opts k8sapi.ListOptions) (watch.Stream[k8sapi.Deployment], error) {
	if opts.SendInitialEvents != nil {
		return nil, &k8sapi.APIError{Code: http.StatusUnprocessableEntity}
	}
	ctx, cancel := context.WithCancel(ctx)
	return exampleStream{s.events, ctx, cancel}, nil
}

type exampleStream struct {
	events <-chan k8sapi.WatchEvent[k8sapi.Deployment]
	ctx    context.Context
	cancel context.CancelFunc
}

func (s exampleStream) Next() (k8sapi.WatchEvent[k8sapi.Deployment], error) {
	select {
	case ev := <-s.events:
		return ev, nil
	case <-s.ctx.Done():
		return k8sapi.WatchEvent[k8sapi.Deployment]{}, k8sapi.ErrClosed
	}
}

func (s exampleStream) Close() error { s.cancel(); return nil }

func exampleDeployment(resourceVersion string, replicas int32) k8sapi.Deployment {
	return k8sapi.Deployment{
		ObjectMeta: k8sapi.ObjectMeta{Namespace: "shop", Name: "web", ResourceVersion: resourceVersion},
		Spec:       k8sapi.DeploymentSpec{Replicas: &replicas},
	}
}

// After a write, the watch lags the server. Cache.Wrote makes Get return
// the object the server answered until the watch has caught up with it,
// so that the next reconcile does not act on the object as it was before
// and write again.
func ExampleCache_Wrote() {
	src := exampleSource{events: make(chan k8sapi.WatchEvent[k8sapi.Deployment], 3)}
	changed := make(chan struct{}, 1)
	c := watch.NewCache(watch.Config[k8sapi.Deployment]{
		Source:  src, // in a program: watch.ClientSource[k8sapi.Deployment](client, k8sapi.Deployments)
		Handler: watch.OnChange(func(*k8sapi.Deployment) { changed <- struct{}{} }),
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go c.Run(ctx)
	show := func(after string) {
		got, _ := c.Get("shop", "web")
		stored, _ := c.Store().Get("shop", "web")
		fmt.Printf("%-18s Get: %s, %d replicas; Store: %s\n", after+":", got.ResourceVersion, *got.Spec.Replicas, stored.ResourceVersion)
	}
	wait := func(after string) {
		select {
		case <-changed:
			show(after)
		case <-time.After(10 * time.Second):
			fmt.Println("no change after", after)
		}
	}
	wait("the list")

	prev, _ := c.Get("shop", "web")
	applied := exampleDeployment("3", 5) // the server's answer to a write of 5 replicas, based on prev
	c.Wrote(prev, &applied)
	show("the write")

	src.events <- k8sapi.WatchEvent[k8sapi.Deployment]{Type: k8sapi.Modified, Object: exampleDeployment("2", 2)}
	wait("an older event")
	src.events <- k8sapi.WatchEvent[k8sapi.Deployment]{Type: k8sapi.Modified, Object: exampleDeployment("3", 5)}
	wait("the write's event")
	src.events <- k8sapi.WatchEvent[k8sapi.Deployment]{Type: k8sapi.Modified, Object: exampleDeployment("4", 7)}
	wait("a later event")
	// Output:
	// the list:          Get: 1, 2 replicas; Store: 1
	// the write:         Get: 3, 5 replicas; Store: 1
	// an older event:    Get: 3, 5 replicas; Store: 2
	// the write's event: Get: 3, 5 replicas; Store: 3
	// a later event:     Get: 4, 7 replicas; Store: 4
}
