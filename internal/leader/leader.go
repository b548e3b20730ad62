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
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
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
	leases        k8sapi.Typed[k8sapi.Lease]
	namespace     string
	name          string
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	clock         k8sapi.Clock
	log           *slog.Logger

	leading atomic.Bool
	mu      sync.Mutex
	holder  string // last holder seen

	// Owned by Run's goroutine.
	running    atomic.Bool
	observed   record
	observedAt time.Time
	last       *k8sapi.Lease // the Lease as last read or written; nil to read it first
	failing    bool
}

// New checks cfg and returns an Elector.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, errors.New("leader: Config.Client is required")
	}
	if cfg.Name == "" {
		return nil, errors.New("leader: Config.Name is required")
	}
	e := &Elector{
		leases:        k8sapi.For[k8sapi.Lease](cfg.Client, k8sapi.Leases),
		namespace:     cfg.Namespace,
		name:          cfg.Name,
		identity:      cfg.Identity,
		leaseDuration: cmp.Or(cfg.LeaseDuration, DefaultLeaseDuration),
		renewDeadline: cmp.Or(cfg.RenewDeadline, DefaultRenewDeadline),
		retryPeriod:   cmp.Or(cfg.RetryPeriod, DefaultRetryPeriod),
		clock:         cfg.Clock,
		log:           cfg.Logger,
	}
	if e.namespace == "" {
		e.namespace = cfg.Client.Namespace()
	}
	// A bad name would be refused by the server at every attempt, forever:
	// say so now instead.
	if !isDNSSubdomain(e.name) {
		return nil, fmt.Errorf("leader: lease name %q is not a valid object name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)", e.name)
	}
	if !isDNSLabel(e.namespace) {
		return nil, fmt.Errorf("leader: lease namespace %q is not a valid namespace name (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)", e.namespace)
	}
	switch {
	case e.leaseDuration < time.Second:
		return nil, fmt.Errorf("leader: LeaseDuration %v is under the API's 1s resolution", e.leaseDuration)
	case e.renewDeadline >= e.leaseDuration:
		return nil, fmt.Errorf("leader: RenewDeadline %v must be less than LeaseDuration %v", e.renewDeadline, e.leaseDuration)
	case e.retryPeriod <= 0 || e.retryPeriod >= e.renewDeadline:
		return nil, fmt.Errorf("leader: RetryPeriod %v must be positive and less than RenewDeadline %v", e.retryPeriod, e.renewDeadline)
	}
	if e.identity == "" {
		id, err := DefaultIdentity()
		if err != nil {
			return nil, err
		}
		e.identity = id
	}
	if e.clock == nil {
		e.clock = k8sapi.RealClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.log = e.log.With("lease", e.namespace+"/"+e.name, "identity", e.identity)
	return e, nil
}

// isDNSLabel reports whether s is an RFC 1123 label, as namespace names
// are.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is an RFC 1123 subdomain, as the
// names of most objects, Leases included, are.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !isDNSLabel(label) {
			return false
		}
	}
	return true
}

// DefaultIdentity returns the host name (in a pod, the pod's name), an
// underscore and 32 random hex digits, so that a restarted process never
// mistakes its predecessor's lease for its own.
func DefaultIdentity() (string, error) {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("leader: no host name for the identity: %v", err)
	}
	return h + "_" + randomHex(), nil
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Identity returns this replica's identity.
func (e *Elector) Identity() string { return e.identity }

// IsLeader reports whether this replica leads now.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Leader returns the holder of the Lease as last seen: this replica's
// identity while it leads, "" if the Lease is free or not read yet.
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.holder
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
	if !e.acquire(ctx) {
		return nil
	}
	leadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	e.leading.Store(true)
	e.log.Info("leader: started leading")
	go func() {
		defer close(done)
		onStartedLeading(leadCtx)
	}()
	err := e.renew(ctx)
	cancel()
	e.leading.Store(false)
	if err == nil {
		// ctx ended: let the work stop, then hand over at once.
		select {
		case <-done:
			e.release()
		case <-e.after(e.renewDeadline):
			e.log.Warn("leader: leading function did not return in time; not releasing the lease, it will expire")
		}
		e.log.Info("leader: stopped leading: shutting down")
	} else {
		e.log.Warn("leader: stopped leading", "err", err)
	}
	if onStoppedLeading != nil {
		onStoppedLeading()
	}
	return err
}

// after returns a channel that is closed once d has elapsed on the clock.
func (e *Elector) after(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	e.clock.AfterFunc(d, func() { close(c) })
	return c
}

// acquire tries every RetryPeriod until it holds the Lease (true) or ctx
// ends (false).
func (e *Elector) acquire(ctx context.Context) bool {
	for {
		attempt, cancel := context.WithTimeout(ctx, e.renewDeadline)
		ok := e.tryAcquireOrRenew(attempt)
		cancel()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-e.after(e.retryPeriod):
		}
	}
}

// renew renews every RetryPeriod. It returns nil when ctx ends, and
// ErrLeaseLost, wrapped with the reason, when the elector must stop.
func (e *Elector) renew(ctx context.Context) error {
	lastRenew := e.observedAt // when the successful acquire started
	for {
		// Wait a retry period, but never past the renew deadline, so that
		// a leader that cannot renew stops right at it.
		wait := min(e.retryPeriod, lastRenew.Add(e.renewDeadline).Sub(e.clock.Now()))
		select {
		case <-ctx.Done():
			return nil
		case <-e.after(max(wait, 0)):
		}
		start := e.clock.Now()
		if mustStepDown(lastRenew, start, e.renewDeadline) {
			return fmt.Errorf("%w: not renewed for %v", ErrLeaseLost, start.Sub(lastRenew))
		}
		attempt, cancel := context.WithTimeout(ctx, lastRenew.Add(e.renewDeadline).Sub(start))
		ok := e.tryAcquireOrRenew(attempt)
		cancel()
		switch {
		case ok:
			lastRenew = start
		case ctx.Err() != nil:
			return nil
		case e.observed.holder != e.identity && e.observed.holder != "":
			return fmt.Errorf("%w: taken by %q", ErrLeaseLost, e.observed.holder)
		case mustStepDown(lastRenew, e.clock.Now(), e.renewDeadline):
			return fmt.Errorf("%w: not renewed for %v", ErrLeaseLost, e.clock.Now().Sub(lastRenew))
		}
	}
}

// tryAcquireOrRenew makes one attempt to hold the Lease and reports
// whether it holds it now. On success e.observedAt is the time the
// attempt started.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	start := e.clock.Now()
	if e.last != nil && e.leading.Load() {
		// Renew from the copy we wrote last, without reading first. If
		// that fails (a conflict: someone else wrote the Lease), read it
		// and decide again in this same attempt.
		if e.update(ctx, start, e.last) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
	got, err := e.leases.Get(ctx, e.namespace, e.name, k8sapi.GetOptions{})
	switch {
	case k8sapi.IsNotFound(err):
		return e.create(ctx, start)
	case err != nil:
		e.failed("reading the lease", err)
		return false
	}
	rec := recordOf(got)
	if !rec.equal(e.observed) || e.observedAt.IsZero() {
		e.observed, e.observedAt = rec, start
		e.setHolder(rec.holder)
	}
	if !canAcquire(rec, e.observedAt, start, e.identity, e.leaseDuration) {
		e.last = nil
		e.succeeded()
		return false
	}
	if rec.holder != e.identity {
		e.log.Info("leader: taking the lease", "from", rec.holder)
	}
	return e.update(ctx, start, got)
}

// update writes the acquired or renewed record over lease, conditional on
// its resourceVersion.
func (e *Elector) update(ctx context.Context, start time.Time, lease *k8sapi.Lease) bool {
	upd := next(recordOf(lease), e.identity, start, e.leaseDuration).apply(*lease)
	got, err := e.leases.Update(ctx, e.namespace, e.name, &upd, k8sapi.WriteOptions{})
	if err != nil {
		e.last = nil // read it again next time
		e.failed("writing the lease", err)
		return false
	}
	return e.wrote(got, start)
}

func (e *Elector) create(ctx context.Context, start time.Time) bool {
	l := first(e.identity, start, e.leaseDuration).apply(k8sapi.Lease{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: k8sapi.ObjectMeta{Name: e.name, Namespace: e.namespace},
	})
	got, err := e.leases.Create(ctx, e.namespace, &l, k8sapi.WriteOptions{})
	if err != nil {
		e.failed("creating the lease", err)
		return false
	}
	return e.wrote(got, start)
}

// wrote records got, the Lease as this replica just wrote it in an
// attempt that started at start, and reports success.
func (e *Elector) wrote(got *k8sapi.Lease, start time.Time) bool {
	e.last = got
	e.observed, e.observedAt = recordOf(got), start
	e.setHolder(e.identity)
	e.succeeded()
	return true
}

// release gives the Lease up if this replica still holds it. It reads
// the Lease first, since the last renewal may have been cut short by the
// shutdown, and uses its own short deadline, as Run's context has ended.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.retryPeriod)
	defer cancel()
	lease, err := e.leases.Get(ctx, e.namespace, e.name, k8sapi.GetOptions{})
	if err == nil && recordOf(lease).holder != e.identity {
		return // not ours any more
	}
	if err == nil {
		upd := released(recordOf(lease), e.clock.Now()).apply(*lease)
		_, err = e.leases.Update(ctx, e.namespace, e.name, &upd, k8sapi.WriteOptions{})
	}
	if err != nil {
		e.log.Warn("leader: releasing the lease failed; it will expire", "err", err)
		return
	}
	e.setHolder("")
	e.log.Info("leader: released the lease")
}

func (e *Elector) setHolder(h string) {
	e.mu.Lock()
	e.holder = h
	e.mu.Unlock()
}

// failed logs the first failure of a streak; conflicts are normal races
// and are not logged.
func (e *Elector) failed(what string, err error) {
	if k8sapi.IsConflict(err) || k8sapi.IsAlreadyExists(err) || e.failing {
		return
	}
	e.failing = true
	e.log.Warn("leader: "+what+" failed; retrying, further failures are not logged until an attempt succeeds", "err", err)
}

func (e *Elector) succeeded() { e.failing = false }
