// Package controlplane builds, starts and stops a real, local Kubernetes
// control plane for tests and for running the operator by hand.
//
// # Building
//
// The binaries come from the Go module proxy, at the versions pinned by the
// tools modules under hack/controlplane (each with its own go.mod and go.sum,
// so the main module stays free of dependencies):
//
//   - kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
//     from k8s.io/kubernetes [KubernetesVersion];
//   - etcd from go.etcd.io/etcd/server/v3 [EtcdVersion];
//   - kwok from sigs.k8s.io/kwok [KwokVersion], which plays the kubelet of
//     one fake Node, so Pods get scheduled and become Ready.
//
// [Build] compiles them into [DefaultDir], a folder outside the repository
// (${XDG_CACHE_HOME:-~/.cache}/widget-operator/controlplane/<versions>), and
// does nothing when a stamp there says the same inputs were built before. A
// cold build takes about ten minutes on two cores, so it must run before
// "go test" does: "go run ./hack/localcluster build". Tests never build; a
// test that needs a plane whose binaries are missing fails and says which
// command to run.
//
// # Starting
//
// [Start] makes a fresh data folder, a CA and certificates (crypto/x509),
// then starts etcd and kube-apiserver on free loopback ports and, unless
// [Options.Bare] is set, kube-controller-manager, kube-scheduler and kwok
// with one fake Node. It returns once /readyz answers, the Node is Ready and
// the default ServiceAccount exists, or fails at [Options.ReadyTimeout]. The
// apiserver writes an audit log (every request at Metadata level, JSON
// lines) that [Plane.AuditEvents] parses.
//
// kwok also serves the fake Node's kubelet endpoint ([Plane.KubeletAddr]),
// over TLS that the apiserver verifies with the plane's CA: a Pod's log and
// attach read the CRI log file [Plane.PodLogPath] ([Plane.AppendPodLog]
// writes it, [Plane.ResetPodLog] empties it), exec runs the command on this machine, as this user, and a
// port-forward to [EchoPort] reaches the plane's TCP echo server.
// [Plane.RunPod] makes a Running Pod on the fake Node. kwok v0.8.0 loses a
// command's exit code: a non-zero exit reaches the client as an
// InternalError status whose message ends in "exit status N", not as the
// NonZeroExitCode status a kubelet sends. Every component logs to a file in
// the data folder; [Plane.LogTail] prints the end of one.
//
// Every process is started in its own process group with a parent-death
// signal of SIGKILL, so none outlives the program that started it, even
// when a test binary is killed or times out. [Plane.Stop] ends each
// process it started, by process group, and removes the data folder.
//
// # Tests
//
// A test package that talks to Kubernetes shares one plane per test binary,
// started on first use and stopped after the last test:
//
//	var plane controlplane.Shared
//
//	func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		p := plane.Get(t)
//		...
//	}
//
// Tests on the shared plane must not disturb it: each works in a namespace
// of its own ([Plane.CreateNamespace]). A test that restarts the apiserver
// or compacts etcd starts a plane of its own with [Start] and stops it in
// t.Cleanup. "go test ./..." runs package binaries in parallel, each with
// at most one shared plane. Planes are not shared across test binaries: a
// full plane is ready in about 9 seconds (a bare one in 3) and takes about
// 550 MiB, which is cheaper than the coupling of tests in different
// packages through one cluster.
//
// A Plane is safe for concurrent use by multiple goroutines, except that
// the fault helpers (StopAPIServer, KillAPIServer, StartAPIServer) must
// not run concurrently with each other or with Stop.
//
// The package is for tests and tooling only; product code never imports it.
package controlplane
