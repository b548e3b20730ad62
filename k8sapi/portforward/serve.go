package portforward

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// Serve accepts connections on l and forwards each to port of pod, as
// "kubectl port-forward" does, until ctx ends or l fails; it then closes
// l and every forwarded connection, waits for their goroutines and
// returns: nil when ctx ended, else the Accept error.
//
// report, when not nil, receives the error that ended a connection, from
// the connection's goroutine: an *Error from the server, a k8sapi error
// when the API server refused the connection. The local connection is
// closed then.
func (f *Forwarder) Serve(ctx context.Context, l net.Listener, namespace, pod string, port uint16, report func(error)) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		local, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.Close()
			return err
		}
		wg.Go(func() {
			if err := f.forward(ctx, local, namespace, pod, port); err != nil && report != nil {
				report(err)
			}
		})
	}
}

// forward copies between local and a new connection to the pod until
// either side ends or ctx does.
func (f *Forwarder) forward(ctx context.Context, local net.Conn, namespace, pod string, port uint16) error {
	defer local.Close()
	remote, err := f.Dial(ctx, namespace, pod, port)
	if err != nil {
		return err
	}
	defer remote.Close()
	stop := context.AfterFunc(ctx, func() { remote.Close(); local.Close() })
	defer stop()
	up := make(chan struct{})
	go func() {
		defer close(up)
		io.Copy(remote, local)
		// The channel protocol cannot half-close: at the local end's EOF
		// the whole connection to the pod ends.
		remote.Close()
	}()
	_, err = io.Copy(local, remote)
	local.Close()
	remote.Close()
	<-up
	var pe *Error
	switch {
	case ctx.Err() != nil || errors.Is(err, net.ErrClosed):
		return nil
	case errors.As(err, &pe):
		return pe // not wrapped in the local connection's error
	}
	return err
}
