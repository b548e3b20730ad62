package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// FloorName labels the results of the raw-write floor.
const FloorName = "raw-write floor"

// FloorWorkers is the floor's concurrency: the operators' worker count.
const FloorWorkers = 4

// FloorCmd is the raw-write floor's binary, bench/cmd/floor.
var FloorCmd = Target{Dir: ".", Package: "./bench/cmd/floor"}

// Floor is the raw-write floor, the FloorCmd binary at bin, run as the
// operator's ServiceAccount (the permissions of manifests/rbac). It
// pushes the three writes an operator makes for each new Widget (create
// its Deployment, create its Service, patch its status) with
// FloorWorkers goroutines, and nothing else: no list, no watch, no cache.
// It knows the Widgets from a file the bench writes at their creation.
// Its time to converge is how fast this API server takes the writes
// alone, and its CPU and peak RSS what they cost a client; what an
// operator takes beyond them is the operator's own cost.
//
// Its process says it is done with a file, and waits to be stopped: the
// peak RSS of a child that has exited (rusage) would be the bench's own,
// which the child shares until its exec.
func Floor(bin string) Operator {
	return Operator{Name: FloorName, Binary: bin, Namespace: "widget-system", ServiceAccount: "widget-operator", Floor: true}
}

// runFloor measures the raw-write floor (see Floor): the Widgets are
// created and written to a file, then the floor's process is timed from
// its start until the tracker sees every Widget converged and it is done;
// its CPU and peak RSS are read from /proc then.
func runFloor(ctx context.Context, cfg Config, p *controlplane.Plane, admin *k8sapi.Client, kc, work string, res *Result, logf func(string, ...any)) error {
	logf("creating %d widgets", cfg.N)
	widgets, err := createWidgets(ctx, admin, cfg.N)
	if err != nil {
		return err
	}
	data, err := json.Marshal(widgets)
	if err != nil {
		return err
	}
	file := filepath.Join(work, "widgets.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	tr := newTracker(admin, cfg.N)
	trCtx, stopTracker := context.WithCancel(ctx)
	defer stopTracker()
	if err := tr.start(trCtx); err != nil {
		return err
	}
	logf("writing")
	done := filepath.Join(work, "floor.done")
	pr, err := spawn(cfg.Operator, []string{"-kubeconfig", kc, "-widgets", file, "-done", done, "-workers", strconv.Itoa(FloorWorkers)}, work, "floor")
	if err != nil {
		return err
	}
	defer pr.stop()
	// Both the tracker's convergence (whose time is the result) and the
	// floor's done, after every write's answer, are awaited: the tracker
	// can see the last status before its write has its answer, and the
	// API server logs a request once it has answered, so counting earlier
	// could miss one.
	deadline := time.After(cfg.Timeout)
	if err := waitFile(done, pr, deadline); err != nil {
		return fmt.Errorf("bench: floor: %w: %s\n%s", err, tr.describe(), pr.tail())
	}
	select {
	case <-tr.done:
	case <-deadline:
		return fmt.Errorf("bench: floor: written but not converged within %v: %s", cfg.Timeout, tr.describe())
	}
	res.Converge = tr.at.Sub(pr.started)
	st, err := readProc(pr.pid())
	if err != nil {
		return err
	}
	res.CPU, res.PeakRSS = st.cpu, st.hwm
	end := time.Now()
	events, err := auditAfter(ctx, p, end)
	if err != nil {
		return err
	}
	res.Requests = CountRequests(events, cfg.Operator.User(), pr.started, end)
	logf("converged in %v, cpu %v, peak RSS %d MiB; %d writes", res.Converge.Round(time.Millisecond), res.CPU, res.PeakRSS>>20, res.Requests.Writes)
	return nil
}

// waitFile returns once the file at path exists, checking every 20 ms,
// or an error when the process p exits first or the deadline fires.
func waitFile(path string, p *process, deadline <-chan time.Time) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-p.exited:
			return fmt.Errorf("exited before it was done (%v)", p.cmd.ProcessState)
		case <-deadline:
			return errors.New("writes not answered in time")
		}
	}
}
