package main

import (
	"context"
	"encoding/json"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// validatingWebhooks is the resource of ValidatingWebhookConfigurations.
var validatingWebhooks = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1",
	Resource: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"}

// The names of the webhook configuration and of its one webhook.
const (
	webhookConfigName = "routes." + group
	webhookName       = "unique-target." + group
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

// WebhookConfig returns the ValidatingWebhookConfiguration of the
// unique-target webhook at url+"/validate", for Routes of any version
// (sent as v1) created or updated, with failurePolicy policy ("Fail" or
// "Ignore").
func WebhookConfig(url string, caBundle []byte, policy string) object {
	return object{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": object{"name": webhookConfigName},
		"webhooks": []object{{"name": webhookName, "admissionReviewVersions": []string{"v1"}, "sideEffects": "None",
			"failurePolicy": policy, "matchPolicy": "Equivalent", "timeoutSeconds": 5,
			"clientConfig": object{"url": url + "/validate", "caBundle": caBundle},
			"rules": []object{{"apiGroups": []string{group}, "apiVersions": []string{"v1"}, "resources": []string{routes.Resource},
				"operations": []string{"CREATE", "UPDATE"}, "scope": "Namespaced"}}}}}
}

// Install applies the CRD and the webhook configuration (failurePolicy
// Fail) for the webhooks at url, signed by caBundle.
func Install(ctx context.Context, c *k8sapi.Client, url string, caBundle []byte) error {
	if err := apply(ctx, c, k8sapi.CustomResourceDefinitions, CRD(url, caBundle)); err != nil {
		return err
	}
	return apply(ctx, c, validatingWebhooks, WebhookConfig(url, caBundle, "Fail"))
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
