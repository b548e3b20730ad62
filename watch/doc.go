// Package watch keeps a local, consistent copy of a Kubernetes resource:
// it lists, then watches, tracking resourceVersion through bookmarks,
// reconnects with backoff, relists atomically on 410 Gone and tears down
// connections that have gone silent.
//
// An [Informer] reads through a [Source] ([ClientSource] for the API
// server), keeps the objects in a [Store] keyed by "namespace/name", and
// calls a [Handler] for every add, update and delete:
//
//	inf := watch.New(watch.Config[k8sapi.Deployment]{
//		Source:    watch.ClientSource[k8sapi.Deployment](client, k8sapi.Deployments),
//		Namespace: "prod",
//		Handler:   watch.Handler[k8sapi.Deployment]{OnAdd: ..., OnUpdate: ..., OnDelete: ...},
//		Indexers:  map[string]watch.IndexFunc[k8sapi.Deployment]{watch.IndexControllerUID: watch.ControllerUID[k8sapi.Deployment]},
//	})
//	go inf.Run(ctx)
//
// Objects in the store are shared: never mutate one; copy it first
// (package watch/deepcopy copies any object).
//
// A [Cache] is an Informer for a program that also writes the resource:
// it has indexes by controlling owner and by label built in, and after
// [Cache.Wrote] its [Cache.Get] returns the object the server answered
// until the watch delivers that object's resourceVersion, a delete or a
// relist. The cache clears each such entry by itself:
//
//	c := watch.NewCache(watch.Config[k8sapi.Deployment]{Source: ..., Handler: watch.OnChange(enqueue)})
//	prev, _ := c.Get("prod", "web")
//	applied, err := deployments.Apply(ctx, "prod", "web", want, opts)
//	if err == nil {
//		c.Wrote(prev, applied) // Get returns applied until the watch has it
//	}
//
// The behaviour, in short:
//
//   - The initial state comes as a streaming list: a watch with
//     sendInitialEvents, whose end bookmark replaces the store and which
//     goes on as the watch. A server that refuses one, ends one early or
//     sends nothing for a minute gets list and watch instead, as does
//     every informer with [Config.DisableStreamingList]; a streaming list
//     that fails otherwise (a 410, a broken connection) is followed by
//     one paginated list, so that a stream that keeps failing cannot keep
//     the cache from syncing, and the next sync streams again. The first list
//     asks for resourceVersion "0" (the server's watch cache), and the
//     watch goes on from the list's resourceVersion. Watches ask for
//     bookmarks and a timeout drawn between 5 and 10 minutes.
//   - A watch that ends cleanly is reopened from the last resourceVersion
//     seen, bookmarks included, without a list.
//   - A 410 (HTTP status or ERROR event, "too old resource version") leads
//     to a consistent list (resourceVersion ""), streaming or not, that
//     replaces the cache in one step: vanished objects are delivered as deletes, changed ones as
//     updates, unchanged ones not at all.
//   - A list page over the client's size limit ([k8sapi.ErrBodyTooLarge])
//     is asked for again at once, consistently (resourceVersion ""), with
//     half as many objects, down to one; the next list starts at the full
//     page size. One object over the limit fails the list, which starts
//     over from its first page after a backoff, and so succeeds once the
//     object is gone. A watch event over the limit leads to such a list
//     rather than to the same event again.
//   - Failures back off from 800ms to 30s with jitter, honouring a
//     server's Retry-After (at most a minute, as k8sapi caps it); the
//     backoff starts over after 2 minutes of health. A watch that ends
//     at once with no events counts as a failure.
//   - A watch silent for longer than its timeout plus a margin is torn
//     down and reopened.
//   - A resource not served yet, such as a custom resource whose CRD is
//     applied after the program started, gets a 404 to its list or watch:
//     a failure like any other, retried with backoff, which
//     [Informer.Healthy] reports as "widgets.example.com/v1 is not served
//     (404): waiting for it". The informer syncs once the resource is
//     served.
//
// The logic lives in a pure state machine (step in machine.go), tested by
// table without a network; informer.go carries out its actions.
package watch
