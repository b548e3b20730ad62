package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Shared is one plane shared by the tests of a test binary. It starts on
// the first Get and stops in Run after the last test. The zero value
// starts a full plane with default Options.
//
// A Shared is safe for concurrent use; declare it as a package-level
// variable of the test package and call Run from TestMain.
type Shared struct {
	// Options are the Options of the plane. They must be set before the
	// first Get.
	Options Options

	once  sync.Once
	plane *Plane
	err   error
}

// Get returns the shared plane, starting it on the first call. When it
// cannot start, Get fails the test with the reason (such as "binaries not
// built; run: go run ./hack/localcluster build"), and so does every later
// Get. When the test fails, Get's cleanup logs the end of the apiserver
// and etcd logs.
func (s *Shared) Get(t testing.TB) *Plane {
	t.Helper()
	skipUnitOnly(t)
	s.once.Do(func() {
		s.plane, s.err = Start(context.Background(), s.Options)
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	p := s.plane
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane folder %s\n--- %s\n%s\n--- %s\n%s", p.Dir(),
				KubeAPIServer, p.LogTail(KubeAPIServer, 20), Etcd, p.LogTail(Etcd, 10))
		}
	})
	return p
}

// UnitOnlyEnv names the environment variable that, set to 1, makes every
// test that asks for a plane skip. The mutation run (make mutate) sets it,
// to run the unit tests alone; make test never does.
const UnitOnlyEnv = "WIDGET_UNIT_ONLY"

func skipUnitOnly(t testing.TB) {
	if os.Getenv(UnitOnlyEnv) == "1" {
		t.Skip("controlplane: " + UnitOnlyEnv + "=1: unit tests only")
	}
}

// Run runs the tests and stops the plane if one was started. It returns
// m.Run's exit code, for os.Exit.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	s.Close()
	return code
}

// Close stops the plane if one was started. Get after Close fails.
func (s *Shared) Close() {
	s.once.Do(func() { s.err = errStopped })
	if s.plane != nil {
		s.plane.Stop()
	}
}

// StartForTest starts a plane of the test's own, for a test that disturbs
// it (restarts the apiserver, compacts etcd), and stops it when the test
// ends. The test fails at once when the plane cannot start.
func StartForTest(t testing.TB, opts Options) *Plane {
	t.Helper()
	skipUnitOnly(t)
	p, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane folder %s\n--- %s\n%s\n--- %s\n%s", p.Dir(),
				KubeAPIServer, p.LogTail(KubeAPIServer, 20), Etcd, p.LogTail(Etcd, 10))
		}
		p.Stop()
	})
	return p
}

// TestNamespace creates a namespace named after the test, with a random
// suffix, and deletes it when the test ends.
func (p *Plane) TestNamespace(t testing.TB) string {
	t.Helper()
	var b [3]byte
	rand.Read(b[:])
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
	name = strings.Trim(name, "-")
	if len(name) > 50 {
		name = strings.Trim(name[:50], "-")
	}
	name = fmt.Sprintf("%s-%s", name, hex.EncodeToString(b[:]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.CreateNamespace(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.DeleteNamespace(ctx, name); err != nil && !p.isStopped() {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

func (p *Plane) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}
