// Package widget turns a Widget into the Deployment and Service that run
// it, and reports their state back on the Widget's status.
//
// The core is pure: [Validate] checks a [WidgetSpec]; [DesiredDeployment]
// and [DesiredService] build the server-side apply bodies;
// [DeploymentUpToDate] and [ServiceUpToDate] say whether applying would
// change anything; [StatusFor] works out a [WidgetStatus] from the
// Deployment. [Reconciler] puts them together over a [Reader] per watch
// cache and a small [API] interface (apply and status-patch writes), and
// makes no write at all when the world already matches, which is what
// keeps a controller out of hot loops. [reconcile.Classify] sorts failures
// by what it takes to get past them (Transient, Waiting, Permanent, Moot);
// a refusal the server keeps up is reported on the Widget's status and
// not asked again until something changes, and a
// [reconcile.TerminalError] tells the controller not to retry.
//
// The controller machinery (caches, queue, workers, leader election) and
// the generic helpers (conditions, owner references, child writes) are in
// package reconcile; this package holds the Widget alone.
//
// Nothing in the package modifies an object it was given: objects from a
// cache may be passed in as they are.
package widget
