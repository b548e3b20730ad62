package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager/webhook"
)

// The handlers alone, without TLS or HTTP: what each server spends on a
// review.
func BenchmarkHandlers(b *testing.B) {
	logf.SetLogger(logr.Discard())
	idx := index()
	kit, err := webhook.New(webhook.Config{
		Admission: map[string]webhook.AdmitFunc{"/validate": webhook.Validate(func(_ context.Context, _ *webhook.AdmissionRequest, r, _ *kitV1) error {
			return checkTarget(idx, r.Spec.Target, k8sapi.Key(r.Namespace, r.Name))
		})},
		Conversion: map[string]webhook.ConvertFunc{"/convert": kitConverter()}})
	if err != nil {
		b.Fatal(err)
	}
	scheme := newScheme()
	cr := http.NewServeMux()
	cr.Handle("/convert", crconversion.NewWebhookHandler(scheme, crconversion.NewRegistry()))
	cr.Handle("/validate", admission.WithValidator[*crV1](scheme, crValidator{idx}))
	for _, s := range []struct {
		name string
		h    http.Handler
	}{{"kit", kit}, {"controller-runtime", cr}} {
		for path, body := range bodies() {
			b.Run(s.name+path, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					s.h.ServeHTTP(rec, req)
					if rec.Code != 200 {
						b.Fatal(rec.Code, rec.Body.String())
					}
				}
			})
		}
	}
}
