package operator

import (
	"errors"
	"fmt"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func TestNamespaceTerminating(t *testing.T) {
	terminating := &k8sapi.APIError{Op: "patch", Resource: "deployments", Code: 403, Status: k8sapi.Status{
		Reason:  "Forbidden",
		Details: &k8sapi.StatusDetails{Causes: []k8sapi.StatusCause{{Type: "NamespaceTerminating", Field: "metadata.namespace"}}},
	}}
	forbidden := &k8sapi.APIError{Op: "patch", Resource: "deployments", Code: 403, Status: k8sapi.Status{Reason: "Forbidden"}}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{terminating, true},
		{fmt.Errorf("reconcile: apply deployment: %w", terminating), true},
		{forbidden, false},
		{errors.New("NamespaceTerminating"), false},
	} {
		if got := namespaceTerminating(tt.err); got != tt.want {
			t.Errorf("namespaceTerminating(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
