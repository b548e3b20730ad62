package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

const benchObjects = 10_000

// deploymentListJSON returns a list of n Deployments shaped like the ones
// the operator makes: labels, an annotation, a controller owner, one
// container with a port, two status conditions and managedFields (which
// decoding drops).
func deploymentListJSON(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"100000"},"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"widget-%06d","namespace":"team-%02d",`+
			`"uid":"6f1c0b0e-8d55-4a59-9c1e-%012d","resourceVersion":"%d","generation":3,"creationTimestamp":"2025-01-02T03:04:05Z",`+
			`"labels":{"app.kubernetes.io/name":"widget","app.kubernetes.io/instance":"widget-%06d","app.kubernetes.io/managed-by":"widget-operator"},`+
			`"annotations":{"deployment.kubernetes.io/revision":"3"},`+
			`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"widget-%06d","uid":"0a9e7d3c-1b2f-4c6d-8e9f-%012d","controller":true,"blockOwnerDeletion":true}],`+
			`"managedFields":[{"manager":"widget-operator","operation":"Apply","apiVersion":"apps/v1","time":"2025-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{}}}}}}]},`+
			`"spec":{"replicas":2,"selector":{"matchLabels":{"app.kubernetes.io/instance":"widget-%06d"}},`+
			`"template":{"metadata":{"labels":{"app.kubernetes.io/name":"widget","app.kubernetes.io/instance":"widget-%06d"}},`+
			`"spec":{"containers":[{"name":"widget","image":"registry.example.com/widget:1.4.2","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}]}]}}},`+
			`"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2,`+
			`"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"Deployment has minimum availability."},`+
			`{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","message":"ReplicaSet \"widget-%06d-7d4b9c\" has successfully progressed."}]}}`,
			i, i%20, i, 1000+i, i, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// decodingSource is a Source that decodes a recorded list body on every
// List, as the client does, and serves watches from a benchStream.
type decodingSource struct {
	list   []byte
	stream Stream[k8sapi.Deployment]
}

func (s *decodingSource) List(ctx context.Context, _ string, _ k8sapi.ListOptions) (*k8sapi.List[k8sapi.Deployment], error) {
	l := new(k8sapi.List[k8sapi.Deployment])
	if err := json.Unmarshal(s.list, l); err != nil {
		return nil, err
	}
	return l, nil
}

func (s *decodingSource) Watch(ctx context.Context, _ string, _ k8sapi.ListOptions) (Stream[k8sapi.Deployment], error) {
	if s.stream == nil {
		return &blockingStream{done: ctx.Done()}, nil
	}
	return s.stream, nil
}

// blockingStream is a Stream with no events that ends with its context.
type blockingStream struct{ done <-chan struct{} }

func (s *blockingStream) Next() (k8sapi.WatchEvent[k8sapi.Deployment], error) {
	<-s.done
	return k8sapi.WatchEvent[k8sapi.Deployment]{}, context.Canceled
}

func (s *blockingStream) Close() error { return nil }

// batchStream is a Stream that delivers one batch of events each time the
// benchmark sends on batches, until done or Close.
type batchStream struct {
	batches chan []*k8sapi.Deployment
	cur     []*k8sapi.Deployment
	done    <-chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (s *batchStream) Next() (k8sapi.WatchEvent[k8sapi.Deployment], error) {
	for len(s.cur) == 0 {
		select {
		case s.cur = <-s.batches:
		case <-s.done:
			return k8sapi.WatchEvent[k8sapi.Deployment]{}, context.Canceled
		case <-s.closed:
			return k8sapi.WatchEvent[k8sapi.Deployment]{}, errors.New("batch stream closed")
		}
	}
	obj := s.cur[0]
	s.cur = s.cur[1:]
	return k8sapi.WatchEvent[k8sapi.Deployment]{Type: k8sapi.Modified, Object: *obj}, nil
}

func (s *batchStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func benchIndexers() map[string]IndexFunc[k8sapi.Deployment] {
	return map[string]IndexFunc[k8sapi.Deployment]{IndexControllerUID: ControllerUID[k8sapi.Deployment]}
}

// syncInformer runs an informer over src until it has synced, and returns
// it with its stop function.
func syncInformer(b *testing.B, src Source[k8sapi.Deployment], h Handler[k8sapi.Deployment]) (*Informer[k8sapi.Deployment], func()) {
	synced := make(chan struct{})
	var n atomic.Int64
	add := h.OnAdd
	h.OnAdd = func(d *k8sapi.Deployment) {
		if add != nil {
			add(d)
		}
		if n.Add(1) == benchObjects {
			close(synced)
		}
	}
	inf := New(Config[k8sapi.Deployment]{DisableStreamingList: true, Source: src, Handler: h, Indexers: benchIndexers()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.Run(ctx); close(done) }()
	<-synced
	return inf, func() { cancel(); <-done }
}

// BenchmarkList lists 10,000 Deployments into a new informer's cache: the
// JSON decoding, the store and its controller index. It also reports the
// heap the cache keeps per Deployment.
func BenchmarkList(b *testing.B) {
	src := &decodingSource{list: deploymentListJSON(benchObjects)}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	inf, stop := syncInformer(b, src, Handler[k8sapi.Deployment]{})
	runtime.GC()
	runtime.ReadMemStats(&after)
	perObject := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchObjects
	if inf.Store().Len() != benchObjects {
		b.Fatalf("store has %d objects", inf.Store().Len())
	}
	stop()
	runtime.KeepAlive(inf)

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, stop := syncInformer(b, src, Handler[k8sapi.Deployment]{})
		stop()
	}
	b.ReportMetric(perObject, "heapB/object")
}

// BenchmarkWatchEvents applies 10,000 MODIFIED events, already decoded, to
// a cache of 10,000 Deployments with a controller index.
func BenchmarkWatchEvents(b *testing.B) {
	list := new(k8sapi.List[k8sapi.Deployment])
	if err := json.Unmarshal(deploymentListJSON(benchObjects), list); err != nil {
		b.Fatal(err)
	}
	// Two generations of every object, alternated, so every event is a
	// real change.
	gens := make([][]*k8sapi.Deployment, 2)
	for g := range gens {
		gens[g] = make([]*k8sapi.Deployment, benchObjects)
		for i := range list.Items {
			d := list.Items[i]
			d.ResourceVersion = strconv.Itoa(200000 + g*benchObjects + i)
			gens[g][i] = &d
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &batchStream{batches: make(chan []*k8sapi.Deployment), done: ctx.Done(), closed: make(chan struct{})}
	src := &decodingSource{list: deploymentListJSON(benchObjects), stream: stream}
	applied := make(chan struct{}, 1)
	var n atomic.Int64
	inf, stop := syncInformer(b, src, Handler[k8sapi.Deployment]{
		OnUpdate: func(_, _ *k8sapi.Deployment) {
			if n.Add(1)%benchObjects == 0 {
				applied <- struct{}{}
			}
		},
	})
	defer stop()

	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		stream.batches <- gens[i%2]
		<-applied
	}
	b.StopTimer()
	if got := inf.Stats().Modified; got != int64(b.N)*benchObjects {
		b.Fatalf("Modified = %d, want %d", got, b.N*benchObjects)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchObjects), "ns/event")
}

// BenchmarkRelist replaces a cache of 10,000 Deployments with a relist of
// 10,000, a tenth of them changed: the store's share of a relist, without
// decoding.
func BenchmarkRelist(b *testing.B) {
	list := new(k8sapi.List[k8sapi.Deployment])
	if err := json.Unmarshal(deploymentListJSON(benchObjects), list); err != nil {
		b.Fatal(err)
	}
	gens := make([][]*k8sapi.Deployment, 2)
	for g := range gens {
		gens[g] = make([]*k8sapi.Deployment, benchObjects)
		for i := range list.Items {
			d := list.Items[i]
			if i%10 == 0 {
				d.ResourceVersion = strconv.Itoa(300000 + g*benchObjects + i)
			}
			gens[g][i] = &d
		}
	}
	s := newStore(func(d *k8sapi.Deployment) *k8sapi.ObjectMeta { return &d.ObjectMeta }, benchIndexers())
	s.core.replace(gens[1])
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if n := len(s.core.replace(gens[i%2])); n != benchObjects/10 {
			b.Fatalf("%d changes, want %d", n, benchObjects/10)
		}
	}
}

// BenchmarkHeldBytes estimates the memory one decoded Deployment holds,
// as the store does twice per watch event (the new object and the old).
func BenchmarkHeldBytes(b *testing.B) {
	list := new(k8sapi.List[k8sapi.Deployment])
	if err := json.Unmarshal(deploymentListJSON(1), list); err != nil {
		b.Fatal(err)
	}
	v := reflect.ValueOf(&list.Items[0])
	b.ReportAllocs()
	for b.Loop() {
		heldBytes(v, 0)
	}
}
