package operator

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/leader"
)

func TestDrainTimeout(t *testing.T) {
	for _, tc := range []struct {
		shutdown time.Duration
		elect    bool
		want     time.Duration
	}{
		{30 * time.Second, false, 30 * time.Second},
		{3 * time.Second, false, 3 * time.Second},
		// With leader election, in-flight work must end before the
		// elector stops waiting to release the lease.
		{30 * time.Second, true, leader.DefaultRenewDeadline - leader.DefaultRetryPeriod},
		{3 * time.Second, true, 3 * time.Second},
	} {
		op := &operator{opts: Options{ShutdownTimeout: tc.shutdown}}
		if tc.elect {
			op.elector = &leader.Elector{}
		}
		if got := op.drainTimeout(); got != tc.want {
			t.Errorf("ShutdownTimeout %v, leader election %v: drain %v, want %v", tc.shutdown, tc.elect, got, tc.want)
		}
	}
}
