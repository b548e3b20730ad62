package widget_test

import (
	"os"
	"testing"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// plane is started by the first test that needs it; etcd and the API
// server are enough.
var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }
