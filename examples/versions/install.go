package main

import (
	"context"
	"encoding/json"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The resources of the webhook configurations.
var (
	validatingWebhooks = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1",
		Resource: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"}
	mutatingWebhooks = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1",
		Resource: "mutatingwebhookconfigurations", Kind: "MutatingWebhookConfiguration"}
)

// The names of the webhook configurations and of their webhooks.
const (
	webhookConfigName = "routes." + group
	webhookName       = "unique-target." + group
	defaultName       = "default-port." + group
)

// object is any object, written whole by server-side apply.
type object = map[string]any

// CRD returns the Route CRD: storage version v1, served v1 and v2, both
// with the status subresource, converted by the webhook at url+"/convert"
// that caBundle (PEM) signs.
func CRD(url string, caBundle []byte) object {
	str := object{"type": "string"}
	status := object{"type": "object", "properties": object{"url": str}}
	version := func(name string, storage bool, spec object) object {
		return object{"name": name, "served": true, "storage": storage, "subresources": object{"status": object{}},
			"schema": object{"openAPIV3Schema": object{"type": "object", "properties": object{
				"spec": object{"type": "object", "required": []string{"target"}, "properties": spec}, "status": status}}}}
	}
	v1 := version("v1", true, object{"target": str})
	v2 := version("v2", false, object{
		"target": object{"type": "object", "required": []string{"host"}, "properties": object{
			"host": str, "port": object{"type": "integer", "minimum": 0, "maximum": 65535}}},
		"weight": object{"type": "integer", "minimum": 0}})
	return object{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": object{"name": routes.Resource + "." + group},
		"spec": object{"group": group, "scope": "Namespaced", "versions": []object{v1, v2},
			"names": object{"plural": routes.Resource, "singular": "route", "kind": routes.Kind, "listKind": "RouteList"},
			"conversion": object{"strategy": "Webhook", "webhook": object{"conversionReviewVersions": []string{"v1"},
				"clientConfig": object{"url": url + "/convert", "caBundle": caBundle}}}}}
}

// WebhookConfigs returns the ValidatingWebhookConfiguration of the
// unique-target webhook at url+"/validate" and the
// MutatingWebhookConfiguration of the default-port webhook at
// url+"/default", for Routes of any version (sent as v1) created or
// updated, with failurePolicy policy ("Fail" or "Ignore").
func WebhookConfigs(url string, caBundle []byte, policy string) map[k8sapi.Resource]object {
	config := func(kind, name, path string) object {
		return object{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": object{"name": webhookConfigName},
			"webhooks": []object{{"name": name, "admissionReviewVersions": []string{"v1"}, "sideEffects": "None",
				"failurePolicy": policy, "matchPolicy": "Equivalent", "timeoutSeconds": 5,
				"clientConfig": object{"url": url + path, "caBundle": caBundle},
				"rules": []object{{"apiGroups": []string{group}, "apiVersions": []string{"v1"}, "resources": []string{routes.Resource},
					"operations": []string{"CREATE", "UPDATE"}, "scope": "Namespaced"}}}}}
	}
	return map[k8sapi.Resource]object{
		validatingWebhooks: config(validatingWebhooks.Kind, webhookName, "/validate"),
		mutatingWebhooks:   config(mutatingWebhooks.Kind, defaultName, "/default"),
	}
}

// Install applies the CRD and the webhook configurations (failurePolicy
// Fail) for the webhooks at url, signed by caBundle.
func Install(ctx context.Context, c *k8sapi.Client, url string, caBundle []byte) error {
	if err := apply(ctx, c, k8sapi.CustomResourceDefinitions, CRD(url, caBundle)); err != nil {
		return err
	}
	return applyConfigs(ctx, c, WebhookConfigs(url, caBundle, "Fail"))
}

// applyConfigs applies the webhook configurations.
func applyConfigs(ctx context.Context, c *k8sapi.Client, configs map[k8sapi.Resource]object) error {
	for r, obj := range configs {
		if err := apply(ctx, c, r, obj); err != nil {
			return err
		}
	}
	return nil
}

// apply writes obj, cluster-scoped, by server-side apply.
func apply(ctx context.Context, c *k8sapi.Client, r k8sapi.Resource, obj object) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	name := obj["metadata"].(object)["name"].(string)
	_, err = k8sapi.For[json.RawMessage](c, r).Patch(ctx, "", name, k8sapi.ApplyPatch, body,
		k8sapi.PatchOptions{FieldManager: "versions-example", Force: true})
	return err
}
