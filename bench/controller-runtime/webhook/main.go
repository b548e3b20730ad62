// Command webhook measures the latency of a conversion and of an
// admission call, under 200 concurrent calls, in the kit's webhook server
// (manager/webhook) and in controller-runtime's (pkg/webhook), each doing
// the same work: the Route of examples/versions converted from v1 to v2,
// and validated against an index of the targets taken. Each server runs
// in a process of its own (this program, with -serve), with the same
// certificate; the driver posts the reviews over HTTPS on loopback,
// keeping its connections, and prints a Markdown table of the medians of
// the runs.
//
//	go run ./webhook [-calls 20000] [-concurrency 200] [-runs 3]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager/webhook"
)

// taken is the size of the index of targets the validation looks up.
const taken = 1000

func main() {
	serve := flag.String("serve", "", "run a server, kit or controller-runtime, with the certificate in -dir, and print its address")
	dir := flag.String("dir", "", "with -serve: the folder of tls.crt and tls.key")
	calls := flag.Int("calls", 20000, "calls measured per case and run")
	concurrency := flag.Int("concurrency", 200, "concurrent calls")
	runs := flag.Int("runs", 3, "runs of each server, taking turns to go first")
	flag.Parse()
	if *serve != "" {
		if err := runServer(*serve, *dir); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := drive(*calls, *concurrency, *runs); err != nil {
		log.Fatal(err)
	}
}

// index returns the targets taken: t0:1 ... of Routes ns/r0 ...
func index() map[string]string {
	m := make(map[string]string, taken)
	for i := range taken {
		m[fmt.Sprintf("t%d:1", i)] = fmt.Sprintf("ns/r%d", i)
	}
	return m
}

func checkTarget(idx map[string]string, target, key string) error {
	if other, ok := idx[target]; ok && other != key {
		return fmt.Errorf("target %q is taken by Route %s", target, other)
	}
	return nil
}

// runServer runs one server until it is signalled, after printing its
// address.
func runServer(which, dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	idx := index()
	errc := make(chan error, 1)
	switch which {
	case "kit":
		s, err := webhook.New(webhook.Config{Addr: addr, CertDir: dir,
			Admission: map[string]webhook.AdmitFunc{"/validate": webhook.Validate(func(_ context.Context, _ *webhook.AdmissionRequest, r, _ *kitV1) error {
				return checkTarget(idx, r.Spec.Target, k8sapi.Key(r.Namespace, r.Name))
			})},
			Conversion: map[string]webhook.ConvertFunc{"/convert": kitConverter()}})
		if err != nil {
			return err
		}
		go func() { errc <- s.Run(ctx) }()
	case "controller-runtime":
		logf.SetLogger(logr.Discard())
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		srv := crwebhook.NewServer(crwebhook.Options{Host: host, Port: p, CertDir: dir})
		scheme := newScheme()
		srv.Register("/convert", crconversion.NewWebhookHandler(scheme, crconversion.NewRegistry()))
		srv.Register("/validate", admission.WithValidator[*crV1](scheme, crValidator{idx}))
		go func() { errc <- srv.Start(ctx) }()
	default:
		return fmt.Errorf("-serve %q: want kit or controller-runtime", which)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not listening after 10s", which)
		}
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Println(addr)
	return <-errc
}

// kitConverter is the kit's conversion of the Route.
func kitConverter() webhook.ConvertFunc {
	return webhook.Converter(webhook.Hub[kitV1](group+"/v1"),
		webhook.VersionOf(group+"/v2",
			func(from *kitV2, to *kitV1) error {
				to.ObjectMeta = from.ObjectMeta
				to.Spec, to.Annotations = toV1(from.Spec, from.Annotations)
				return nil
			},
			func(from *kitV1, to *kitV2) error {
				to.ObjectMeta = from.ObjectMeta
				to.Spec, to.Annotations = toV2(from.Spec, from.Annotations)
				return nil
			}))
}

type crValidator struct{ idx map[string]string }

func (v crValidator) ValidateCreate(_ context.Context, r *crV1) (admission.Warnings, error) {
	return nil, checkTarget(v.idx, r.Spec.Target, r.Namespace+"/"+r.Name)
}

func (v crValidator) ValidateUpdate(_ context.Context, _, r *crV1) (admission.Warnings, error) {
	return nil, checkTarget(v.idx, r.Spec.Target, r.Namespace+"/"+r.Name)
}

func (crValidator) ValidateDelete(context.Context, *crV1) (admission.Warnings, error) {
	return nil, nil
}

var _ runtime.Object = (*crV1)(nil)

// The bodies posted: a Route as the API server sends it, with
// managedFields, labels and an annotation.
const route = `{"apiVersion":"versions.example.com/v1","kind":"Route","metadata":{"name":"bench","namespace":"ns","uid":"8a1c4c1e-1f6e-4a8e-9a55-6c2b1c0d1e2f","resourceVersion":"12345","generation":1,"creationTimestamp":"2026-12-02T05:00:00Z","labels":{"app":"bench","team":"a"},"annotations":{"note":"benchmark","versions.example.com/v2-spec":"{\"target\":{\"host\":\"\"},\"weight\":7}"},"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"versions.example.com/v1","time":"2026-12-02T05:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:target":{}}}}]},"spec":{"target":"db.internal:5432"}}`

func bodies() map[string][]byte {
	conv := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c0ffee00-0000-4000-8000-000000000001","desiredAPIVersion":"versions.example.com/v2","objects":[` + route + `]}}`
	adm := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"c0ffee00-0000-4000-8000-000000000002",` +
		`"kind":{"group":"versions.example.com","version":"v1","kind":"Route"},"resource":{"group":"versions.example.com","version":"v1","resource":"routes"},` +
		`"requestKind":{"group":"versions.example.com","version":"v1","kind":"Route"},"requestResource":{"group":"versions.example.com","version":"v1","resource":"routes"},` +
		`"name":"bench","namespace":"ns","operation":"CREATE","userInfo":{"username":"kubernetes-admin","groups":["system:masters","system:authenticated"]},` +
		`"object":` + route + `,"oldObject":null,"dryRun":false,"options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}`
	return map[string][]byte{"/convert": []byte(conv), "/validate": []byte(adm)}
}

// result is one run of one case.
type result struct {
	p50, p99   time.Duration
	perSecond  float64
	cpuPerCall time.Duration // the server's CPU time per call
}

func drive(calls, concurrency, runs int) error {
	dir, err := os.MkdirTemp("", "webhook-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pool, err := writeCertificate(dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	servers := []string{"kit", "controller-runtime"}
	all := map[string][]result{}
	for run := range runs {
		order := slices.Clone(servers)
		if run%2 == 1 {
			slices.Reverse(order)
		}
		for _, which := range order {
			res, err := measure(self, which, dir, pool, calls, concurrency)
			if err != nil {
				return fmt.Errorf("%s: %w", which, err)
			}
			for path, r := range res {
				all[which+path] = append(all[which+path], r)
				fmt.Fprintf(os.Stderr, "run %d %s %s: p50 %v p99 %v, %.0f/s, %v CPU a call\n", run+1, which, path, r.p50, r.p99, r.perSecond, r.cpuPerCall)
			}
		}
	}
	fmt.Printf("| %d calls, %d at a time (median of %d runs) | the kit | controller-runtime | kit / controller-runtime |\n|---|--:|--:|--:|\n", calls, concurrency, runs)
	for _, c := range []struct{ path, what string }{{"/convert", "conversion (v1 to v2, one object)"}, {"/validate", "admission (validating CREATE)"}} {
		k, r := median(all["kit"+c.path]), median(all["controller-runtime"+c.path])
		fmt.Printf("| %s p50 | %s | %s | %.2f |\n", c.what, ms(k.p50), ms(r.p50), float64(k.p50)/float64(r.p50))
		fmt.Printf("| %s p99 | %s | %s | %.2f |\n", c.what, ms(k.p99), ms(r.p99), float64(k.p99)/float64(r.p99))
		fmt.Printf("| %s calls a second | %.0f | %.0f | %.2f |\n", c.what, k.perSecond, r.perSecond, k.perSecond/r.perSecond)
		fmt.Printf("| %s server CPU a call | %s | %s | %.2f |\n", c.what, us(k.cpuPerCall), us(r.cpuPerCall), float64(k.cpuPerCall)/float64(r.cpuPerCall))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

// median returns the median of each figure of rs.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		p50:        time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:        time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
		perSecond:  pick(func(r result) float64 { return r.perSecond }),
		cpuPerCall: time.Duration(pick(func(r result) float64 { return float64(r.cpuPerCall) })),
	}
}

// measure starts the server which, checks that it answers each body as
// expected, warms it up and measures each path.
func measure(self, which, dir string, pool *x509.CertPool, calls, concurrency int) (map[string]result, error) {
	cmd := exec.Command(self, "-serve", which, "-dir", dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("no address: %v", err)
	}
	addr := strings.TrimSpace(line)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency, ForceAttemptHTTP2: false,
	}}
	res := map[string]result{}
	for path, body := range bodies() {
		if err := check(client, "https://"+addr+path, body); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if _, _, err := load(client, "https://"+addr+path, body, calls/10, concurrency); err != nil { // warm up
			return nil, err
		}
		cpu0 := cpuTime(cmd.Process.Pid)
		start := time.Now()
		lat, _, err := load(client, "https://"+addr+path, body, calls, concurrency)
		if err != nil {
			return nil, err
		}
		elapsed := time.Since(start)
		slices.Sort(lat)
		res[path] = result{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], perSecond: float64(calls) / elapsed.Seconds(),
			cpuPerCall: (cpuTime(cmd.Process.Pid) - cpu0) / time.Duration(calls)}
	}
	return res, nil
}

// check posts body once and checks the answer: a conversion to v2 with the
// target split and the weight back, or an admission allowed.
func check(client *http.Client, url string, body []byte) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Response struct {
			Allowed          bool
			ConvertedObjects []kitV2
		}
	}
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != 200 {
		return fmt.Errorf("%d %s (%v)", resp.StatusCode, b, err)
	}
	if strings.HasSuffix(url, "/convert") {
		if len(r.Response.ConvertedObjects) != 1 || r.Response.ConvertedObjects[0].Spec != (specV2{target{"db.internal", 5432}, 7}) {
			return fmt.Errorf("conversion: %s", b)
		}
	} else if !r.Response.Allowed {
		return fmt.Errorf("admission: %s", b)
	}
	return nil
}

// load posts body n times, concurrency at a time, and returns each call's
// latency.
func load(client *http.Client, url string, body []byte, n, concurrency int) ([]time.Duration, int, error) {
	lat := make([]time.Duration, n)
	var next sync.Mutex
	i := 0
	var firstErr error
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				start := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				lat[k] = time.Since(start)
				if err != nil {
					next.Lock()
					firstErr = err
					next.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return lat, n, firstErr
}

// cpuTime returns the user and system CPU time of the process pid.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100
}

// writeCertificate writes a self-signed ECDSA P-256 certificate for
// 127.0.0.1 to dir's tls.crt and tls.key, and returns a pool that trusts
// it.
func writeCertificate(dir string) (*x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	return pool, nil
}
