package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
)

func noEnv(string) string { return "" }

func TestRunFlagErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"bad value", []string{"--workers", "many"}, `invalid value "many" for flag -workers`},
		{"zero workers", []string{"--workers", "0"}, "--workers must be at least 1"},
		{"negative qps", []string{"--qps", "-1"}, "must not be negative"},
		{"stray argument", []string{"run"}, `unexpected argument "run"`},
		{"bad log level", []string{"--log-level", "loud"}, "--log-level"},
		{"bad log format", []string{"--log-format", "xml"}, "--log-format"},
		{"cert dir without TLS", []string{"--metrics-secure=false", "--metrics-cert-dir", "/certs"}, "--metrics-cert-dir needs --metrics-secure"},
		{"missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig"}, "/nonexistent/kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, noEnv, &stdout, &stderr)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero")
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "widget-operator: ") || !strings.Contains(msg, tc.want) {
				t.Fatalf("stderr = %q, want one line containing %q", msg, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestRunHelpAndVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-h"}, noEnv, &stdout, &stderr); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, flag := range []string{"-kubeconfig", "-namespace", "-workers", "-metrics-bind-address", "-metrics-secure", "-metrics-cert-dir", "-health-probe-bind-address",
		"-leader-elect", "-leader-election-namespace", "-leader-election-id", "-log-level", "-log-format", "-qps", "-burst", "-version"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("help does not mention %s", flag)
		}
	}
	stdout.Reset()
	if code := run([]string{"--version"}, noEnv, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "widget-operator ") {
		t.Fatalf("--version: exit %d, stdout %q", code, stdout.String())
	}
	if stderr.Len() != 0 {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

func TestWatchNamespaceFromEnvironment(t *testing.T) {
	f, _, err := parseFlags(nil, func(k string) string {
		if k == "WATCH_NAMESPACE" {
			return "team-a"
		}
		return ""
	}, &bytes.Buffer{})
	if err != nil || f.Namespace != "team-a" {
		t.Fatalf("namespace = %q, err %v", f.Namespace, err)
	}
	f, _, err = parseFlags([]string{"--namespace", "team-b"}, func(string) string { return "team-a" }, &bytes.Buffer{})
	if err != nil || f.Namespace != "team-b" {
		t.Fatalf("flag over env: namespace = %q, err %v", f.Namespace, err)
	}
}

func TestMetricsSecureByDefault(t *testing.T) {
	f, _, err := parseFlags(nil, noEnv, &bytes.Buffer{})
	if err != nil || f.InsecureMetrics || f.MetricsAddr != ":8443" || f.MetricsCertDir != "" {
		t.Fatalf("defaults: insecure %v, address %q, cert dir %q, err %v", f.InsecureMetrics, f.MetricsAddr, f.MetricsCertDir, err)
	}
	f, _, err = parseFlags([]string{"--metrics-secure=false", "--metrics-bind-address", ":8080"}, noEnv, &bytes.Buffer{})
	if err != nil || !f.InsecureMetrics || f.MetricsAddr != ":8080" {
		t.Fatalf("--metrics-secure=false: insecure %v, address %q, err %v", f.InsecureMetrics, f.MetricsAddr, err)
	}
	f, _, err = parseFlags([]string{"--metrics-cert-dir", "/certs"}, noEnv, &bytes.Buffer{})
	if err != nil || f.InsecureMetrics || f.MetricsCertDir != "/certs" {
		t.Fatalf("--metrics-cert-dir: insecure %v, dir %q, err %v", f.InsecureMetrics, f.MetricsCertDir, err)
	}
}

func TestMemoryLimit(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		want   int64
	}{
		{"GOMEMLIMIT wins", env("GOMEMLIMIT", "50MiB", memoryLimitEnv, "134217728"), 0},
		{"downward API, 90%", env(memoryLimitEnv, "268435456"), 241591910},
		{"spaces around", env(memoryLimitEnv, " 1000\n"), 900},
		{"no limit", env(), 0},
	} {
		if got, err := memoryLimit(tc.getenv); err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"128Mi", "-1", "0"} {
		if got, err := memoryLimit(env(memoryLimitEnv, bad)); got != 0 || err == nil || !strings.Contains(err.Error(), memoryLimitEnv+"=") {
			t.Errorf("%s=%q: %d, %v; want an error naming it", memoryLimitEnv, bad, got, err)
		}
	}
}

// Two signals that come together are both acted on: the second exits,
// even when it arrives before the shutdown has begun.
func TestSecondSignalExits(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	var got []string
	onSignals(sigs, func() { got = append(got, "shutdown") }, func() { got = append(got, "exit") })
	if want := "shutdown exit"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
