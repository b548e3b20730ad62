// Package reconcile turns a Widget into the Deployment and Service that run
// it, and reports their state back on the Widget's status.
package reconcile
