package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/zerodep-k8s/widget-operator/events"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// A controller reports a failure twice: the first report creates an
// Event, the repeat patches the Event's series. A stand-in for the API
// server prints what it is sent; a program's client comes from
// k8sapi.Load, and Run stops with the program.
func ExampleRecorder() {
	writes := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev k8sapi.Event
		json.NewDecoder(r.Body).Decode(&ev)
		json.NewEncoder(w).Encode(ev) // the server's copy of the Event
		if r.Method == http.MethodPost {
			writes <- fmt.Sprintf("create: %s %s %q about %s %s, by %s", ev.Type, ev.Reason, ev.Note,
				ev.Regarding.Kind, k8sapi.Key(ev.Regarding.Namespace, ev.Regarding.Name), ev.ReportingController)
		} else {
			writes <- fmt.Sprintf("%s the series: count %d", r.Method, ev.Series.Count)
		}
	}))
	defer srv.Close()
	client, err := k8sapi.New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		log.Fatal(err)
	}

	rec, err := events.New(events.Config{Client: client, Controller: "example.com/dns-operator"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go rec.Run(ctx)

	web := k8sapi.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "6f1c"}
	for range 2 {
		rec.Event(web, "Warning", "NoZone", "no DNS zone for web.shop.example.com")
		select {
		case w := <-writes:
			fmt.Println(w)
		case <-time.After(10 * time.Second):
			fmt.Println("no write")
			return
		}
	}
	// Output:
	// create: Warning NoZone "no DNS zone for web.shop.example.com" about Deployment shop/web, by example.com/dns-operator
	// PATCH the series: count 2
}
