// Package webhook serves the webhooks the API server calls: admission
// reviews (admission.k8s.io/v1) for validating and mutating hooks, and
// conversion reviews (apiextensions.k8s.io/v1) for a custom resource
// served in several versions.
//
// Hooks are typed: [Validate] and [Mutate] decode the object under review
// into the operator's own type, and [Converter] converts between the
// versions of a kind through one hub type. A mutating hook changes the
// object in place and the [Server] answers the JSON patch from its JSON
// before to after; an [AdmitFunc] may also give the patch itself.
//
// The server speaks HTTPS, TLS 1.2 or later, with the certificate from a
// folder read again as it changes (cert-manager's rotation needs no
// restart) or, with none, a self-signed one whose CA bundle it writes to
// a file. It reports controller-runtime's webhook metrics
// ([Server.Register]), and runs in a manager as one of its
// Config.Runnables, whose /readyz fails until the server serves.
//
// The package sits under manager because it shares the manager's
// serving certificate code (manager/internal/certs, which /metrics uses
// too) and runs on the manager's runtime; an operator that does not
// import it links none of it.
package webhook
