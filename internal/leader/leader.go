// Package leader elects one leader among the operator's replicas with a
// coordination.k8s.io/v1 Lease, so that only one of them reconciles at a
// time.
//
// An [Elector] tries to take the Lease every RetryPeriod. It takes it when
// the Lease is missing (it creates it), has no holder (released), or has
// not changed for the holder's lease duration as measured on the
// elector's own clock from when it first saw that version: the holder's
// timestamps are never compared with the local clock, so clock skew
// between nodes cannot elect two leaders. Every write is an update
// conditional on the resourceVersion read, so of two candidates racing
// for the Lease one gets a Conflict and tries again later.
//
// The leader renews every RetryPeriod. If it has not renewed successfully
// for RenewDeadline, or finds another holder, it stops leading: it cancels
// the context given to the leading function and calls the stop function.
// RenewDeadline is shorter than LeaseDuration, so it stops before any
// other replica may start. A process that lost the lease should exit and
// start over as a candidate; [Elector.Run] returns [ErrLeaseLost] to say
// so.
//
// When the context given to Run ends while leading, the elector cancels
// the leading function's context, waits (at most RenewDeadline) for that
// function to return, and then releases the Lease (no holder, a one-second
// duration), so that the next replica takes over within about one
// RetryPeriod instead of a whole LeaseDuration.
//
// The defaults are controller-runtime's: a 15s lease, a 10s renew
// deadline, a 2s retry period.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Defaults for the zero fields of Config.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrLeaseLost is returned by Run when the elector stopped leading
// because it could not renew the Lease in time or another replica took
// it. The process should exit.
var ErrLeaseLost = errors.New("leader: lost the lease")

// Config configures an Elector. Client and Name are required; the zero
// value of every other field is useful.
type Config struct {
	// Client reads and writes the Lease. Required.
	Client *k8sapi.Client
	// Namespace and Name locate the Lease. Empty Namespace means the
	// client's default namespace; Name is required.
	Namespace, Name string
	// Identity names this replica in the Lease's holderIdentity. It must
	// be unique among the replicas. Empty means DefaultIdentity().
	Identity string
	// LeaseDuration is how long others wait, after they last saw the
	// Lease change, before they take it over. Zero means 15s. At least 1s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// stops leading. Zero means 10s. It must be less than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between two attempts to acquire or renew.
	// Zero means 2s. It must be less than RenewDeadline.
	RetryPeriod time.Duration
	// Clock is the time source. Nil means the real clock.
	Clock k8sapi.Clock
	// Logger receives leadership changes, and the first failure of each
	// streak of failed attempts. Nil means no logging.
	Logger *slog.Logger
}

// Elector runs leader election for one replica. Create it with New and
// start it with Run, once. IsLeader and Leader are safe to call from any
// goroutine at any time.
type Elector struct {
	keeper
	lease   slot // owned by Run's goroutine
	running atomic.Bool
	leading atomic.Bool
	holder  atomic.Value // string: the last holder seen
}

// New checks cfg and returns an Elector.
func New(cfg Config) (*Elector, error) {
	k, err := newKeeper(cfg)
	if err != nil {
		return nil, err
	}
	k.cfg.Logger = k.cfg.Logger.With("lease", k.cfg.Namespace+"/"+cfg.Name, "identity", k.cfg.Identity)
	k.retake = true
	return &Elector{keeper: k, lease: slot{name: cfg.Name}}, nil
}

// DefaultIdentity returns the host name (in a pod, the pod's name), an
// underscore and 32 random hex digits, so that a restarted process never
// mistakes its predecessor's lease for its own.
func DefaultIdentity() (string, error) {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("leader: no host name for the identity: %v", err)
	}
	var b [16]byte
	rand.Read(b[:])
	return h + "_" + hex.EncodeToString(b[:]), nil
}

// IsLeader reports whether this replica leads now.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Leader returns the holder of the Lease as last seen: this replica's
// identity while it leads, "" if the Lease is free or not read yet.
func (e *Elector) Leader() string {
	h, _ := e.holder.Load().(string)
	return h
}

// Run campaigns until this replica leads, then calls onStartedLeading on a
// new goroutine with a context that is cancelled when leadership ends,
// and renews the Lease until ctx ends or the Lease is lost. When
// leadership ends it calls onStoppedLeading (if not nil) on Run's
// goroutine, after cancelling that context.
//
// Run returns nil when ctx ended (having released the Lease if it led
// and onStartedLeading returned within RenewDeadline), and ErrLeaseLost
// when it stopped leading for any other reason: the process should then
// exit. Run may be called only once.
func (e *Elector) Run(ctx context.Context, onStartedLeading func(ctx context.Context), onStoppedLeading func()) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("leader: Run called twice")
	}
	var err error
	for {
		if e.leading.Load() {
			err = e.renew(ctx)
		} else {
			e.acquire(ctx, onStartedLeading)
		}
		e.holder.Store(e.lease.observed.holder)
		if err != nil || !e.pause(ctx, []*slot{&e.lease}) {
			break
		}
	}
	if !e.leading.Swap(false) {
		return nil // never led
	}
	e.lease.stop()
	if err == nil {
		// ctx ended: let the work stop, then hand over at once.
		if e.handOver([]*slot{&e.lease})[0] {
			e.holder.Store("")
			e.cfg.Logger.Info("leader: released the lease")
		}
		e.cfg.Logger.Info("leader: stopped leading: shutting down")
	} else {
		e.cfg.Logger.Warn("leader: stopped leading", "err", err)
	}
	if onStoppedLeading != nil {
		onStoppedLeading()
	}
	return err
}

// acquire makes one attempt to take the Lease, and when this replica
// holds it, starts leading: it runs lead with a context that ends with
// leadership.
func (e *Elector) acquire(ctx context.Context, lead func(context.Context)) {
	attempt, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	from, ok := e.take(attempt, &e.lease)
	if !ok {
		return
	}
	if from != e.cfg.Identity && from != "" {
		e.cfg.Logger.Info("leader: took the lease", "from", from)
	}
	e.leading.Store(true)
	e.cfg.Logger.Info("leader: started leading")
	e.start(ctx, &e.lease, lead)
}

// renew renews the Lease once. It returns nil while this replica may go
// on leading or when ctx ended, and ErrLeaseLost, wrapped with the
// reason, when the elector must stop.
func (e *Elector) renew(ctx context.Context) error {
	ok := e.keep(ctx, &e.lease)
	h := e.lease.observed.holder
	switch {
	case ok, ctx.Err() != nil:
		return nil
	case h != e.cfg.Identity && h != "":
		return fmt.Errorf("%w: taken by %q", ErrLeaseLost, h)
	default:
		return fmt.Errorf("%w: not renewed for %v", ErrLeaseLost, e.cfg.Clock.Now().Sub(e.lease.lastRenew))
	}
}
