package podlogs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/podlogs"
)

func ExampleStream() {
	// A stand-in for an API server that has the last two lines of a log.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Path, r.URL.RawQuery)
		io.WriteString(w, "2026-11-30T22:31:07Z listening on :8080\n2026-11-30T22:31:08Z ready\n")
	}))
	defer srv.Close()
	c, err := k8sapi.New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		log.Fatal(err)
	}

	tail := int64(2)
	logs, err := podlogs.Stream(context.Background(), c, "shop", "web-0",
		podlogs.Options{Container: "web", TailLines: &tail, Timestamps: true})
	if err != nil {
		log.Fatal(err) // k8sapi.IsNotFound(err): no such pod
	}
	defer logs.Close()
	lines := bufio.NewScanner(logs)
	for lines.Scan() {
		fmt.Println(lines.Text())
	}
	if err := lines.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// /api/v1/namespaces/shop/pods/web-0/log container=web&tailLines=2&timestamps=true
	// 2026-11-30T22:31:07Z listening on :8080
	// 2026-11-30T22:31:08Z ready
}
