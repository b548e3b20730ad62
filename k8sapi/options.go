package k8sapi

import (
	"fmt"
	"net/url"
	"strconv"
)

// PatchType is the Content-Type of a patch, which says how the server
// applies it.
type PatchType string

// The four patch types the API server accepts.
const (
	// MergePatch is an RFC 7386 JSON merge patch.
	MergePatch PatchType = "application/merge-patch+json"
	// JSONPatch is an RFC 6902 list of operations.
	JSONPatch PatchType = "application/json-patch+json"
	// StrategicMergePatch is a merge patch that merges lists by key; only
	// built-in types support it.
	StrategicMergePatch PatchType = "application/strategic-merge-patch+json"
	// ApplyPatch is server-side apply. The body may be YAML or JSON; this
	// client sends JSON. It needs PatchOptions.FieldManager.
	ApplyPatch PatchType = "application/apply-patch+yaml"
)

// GetOptions tune a get. The zero value reads the latest object.
type GetOptions struct {
	// ResourceVersion, when set, lets the server answer from its cache at
	// that version or newer ("0" means any cached version).
	ResourceVersion string
	// Subresource, such as "status", reads that subresource. Empty means
	// the object itself.
	Subresource string
}

// ListOptions tune a list or a watch. The zero value lists or watches every
// object, consistently, in one page.
type ListOptions struct {
	// LabelSelector and FieldSelector filter objects, in the API's text
	// form ("app=web,tier!=db", "metadata.name=x"). Empty means all.
	LabelSelector, FieldSelector string
	// ResourceVersion and ResourceVersionMatch say how fresh the answer
	// must be; for a watch, ResourceVersion is where the stream starts.
	// Empty means the latest.
	ResourceVersion, ResourceVersionMatch string
	// Limit is the page size for a list. Zero means no limit for List (the
	// namespaced package's ListAll and All read 500 a page).
	Limit int64
	// Continue is the token from the previous page's metadata. Empty
	// means the first page.
	Continue string
	// TimeoutSeconds asks the server to end a watch after that long.
	// Zero means the server's default.
	TimeoutSeconds int64
	// AllowWatchBookmarks asks for BOOKMARK events on a watch.
	AllowWatchBookmarks bool
	// SendInitialEvents asks a watch to start with ADDED events for the
	// existing objects and a bookmark; nil means the server's default.
	SendInitialEvents *bool
	// ShardSelector keeps the objects whose 64-bit FNV-1a hash of a field
	// falls in one of the ranges, in the API's text form
	// ("shardRange(object.metadata.uid, '0x0000000000000000',
	// '0x8000000000000000') || ..."). Kubernetes 1.37 serves it behind the
	// alpha ShardedListAndWatch feature gate; a server without it ignores
	// it (see [ServesShardSelector]). Empty means all.
	ShardSelector string
}

// WriteOptions tune a create or an update. The zero value writes the object
// itself, for real, under the server's default field manager.
type WriteOptions struct {
	// FieldManager names the writer for the server's field ownership.
	// Empty means the server derives one from the User-Agent.
	FieldManager string
	// DryRun asks the server to validate without persisting.
	DryRun bool
	// Subresource, such as "status", writes that subresource. Empty means
	// the object itself.
	Subresource string
}

// PatchOptions tune a patch or an apply.
type PatchOptions struct {
	// FieldManager names the writer. Required for [ApplyPatch]; empty means
	// the server's default for the other patch types.
	FieldManager string
	// Force takes ownership of conflicting fields. Only valid for
	// [ApplyPatch].
	Force bool
	// DryRun asks the server to validate without persisting.
	DryRun bool
	// Subresource, such as "status", patches that subresource. Empty means
	// the object itself.
	Subresource string
}

// DeleteOptions tune a delete. The zero value deletes with the resource's
// default propagation and grace period, unconditionally.
type DeleteOptions struct {
	// PropagationPolicy is "Foreground", "Background" or "Orphan"; empty
	// means the resource's default.
	PropagationPolicy string `json:"propagationPolicy,omitempty"`
	// Preconditions, when non-nil, make the delete fail with a Conflict
	// unless the object still has that UID and/or resourceVersion.
	Preconditions *Preconditions `json:"preconditions,omitempty"`
	// GracePeriodSeconds overrides the object's grace period; nil means
	// its default, 0 means at once.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// Preconditions must hold for a delete to go ahead. Empty fields are not
// checked.
type Preconditions struct {
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// query returns the get parameters: a list's resourceVersion alone.
func (o GetOptions) query() url.Values {
	return ListOptions{ResourceVersion: o.ResourceVersion}.query(false)
}

// query returns the list or watch parameters.
func (o ListOptions) query(watch bool) url.Values {
	q := url.Values{}
	set(q, "labelSelector", o.LabelSelector)
	set(q, "fieldSelector", o.FieldSelector)
	set(q, "shardSelector", o.ShardSelector)
	set(q, "resourceVersion", o.ResourceVersion)
	set(q, "resourceVersionMatch", o.ResourceVersionMatch)
	set(q, "limit", max(o.Limit, 0))
	set(q, "continue", o.Continue)
	if watch {
		q.Set("watch", "1")
		set(q, "timeoutSeconds", max(o.TimeoutSeconds, 0))
		set(q, "allowWatchBookmarks", o.AllowWatchBookmarks)
		if o.SendInitialEvents != nil {
			q.Set("sendInitialEvents", strconv.FormatBool(*o.SendInitialEvents))
		}
	}
	return q
}

func (o WriteOptions) query() url.Values {
	q := url.Values{}
	set(q, "fieldManager", o.FieldManager)
	if o.DryRun {
		q.Set("dryRun", "All")
	}
	return q
}

func (o PatchOptions) query() url.Values {
	q := WriteOptions{FieldManager: o.FieldManager, DryRun: o.DryRun}.query()
	set(q, "force", o.Force)
	return q
}

// set sets the parameter k to v, in fmt's form ("true" for a true bool),
// unless v is its type's zero value.
func set[V comparable](q url.Values, k string, v V) {
	var zero V
	if v != zero {
		q.Set(k, fmt.Sprint(v))
	}
}
