package k8sapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Typed is the set of verbs on one resource, decoding objects into T: one
// of this package's structs, a caller's own struct with the fields it
// needs, or json.RawMessage to keep objects whole.
//
// A Typed is a small value; copy it freely. It is safe for concurrent use
// when its Client is. Single-object verbs need a name, and a namespace when
// the resource is namespaced; an empty namespace on List and Watch means
// all namespaces. For cluster-scoped resources namespace is ignored.
type Typed[T any] struct {
	Client   *Client
	Resource Resource
}

// For returns the verbs on resource r through c, decoding into T.
func For[T any](c *Client, r Resource) Typed[T] {
	return Typed[T]{Client: c, Resource: r}
}

// methods maps each verb to its HTTP method.
var methods = map[string]string{
	"get":    http.MethodGet,
	"list":   http.MethodGet,
	"watch":  http.MethodGet,
	"create": http.MethodPost,
	"update": http.MethodPut,
	"patch":  http.MethodPatch,
	"delete": http.MethodDelete,
}

// newOp checks the arguments of a call of verb on r, its context among
// them, and describes it. It and the other methods of Client that Typed
// calls do not need T, so that the binary holds them once, not once per T. Every
// verb but list, watch and a create of the object itself acts on one
// named object; every verb but list and watch needs a namespace when the
// resource is namespaced.
func (c *Client) newOp(ctx context.Context, r *Resource, verb, namespace, name, sub string) (*operation, error) {
	if !r.Namespaced {
		namespace = ""
	}
	res := r.Resource
	if sub != "" {
		res += "/" + sub
	}
	op := &operation{verb: verb, resource: res, namespace: namespace, name: name, method: methods[verb]}
	many := verb == "list" || verb == "watch"
	var problem string
	switch {
	case ctx == nil:
		problem = "nil Context"
	case c == nil:
		problem = "nil Client"
	case r.Resource == "" || r.Version == "":
		problem = "Resource needs a version and a resource name"
	case name == "" && !many && (verb != "create" || sub != ""):
		problem = "name is empty"
	case namespace == "" && !many && r.Namespaced:
		problem = "namespace is empty"
	case badSegment(name), badSegment(namespace), badSegment(sub):
		problem = `"." and ".." are not valid names`
	}
	if problem != "" {
		return nil, op.requestError(errors.New(problem))
	}
	op.path = r.Path(namespace, name, sub)
	return op, nil
}

func badSegment(s string) bool { return s == "." || s == ".." }

// send checks a call of verb and sends it with query q and body: nil for
// none (a get), []byte as it is, the *T of an update as updateBody makes
// it, anything else marshalled to JSON. It reads an answer of at most the
// object limit and decodes it into a new T, unless T is struct{}: then
// the answer is dropped.
func (t Typed[T]) send(ctx context.Context, verb, namespace, name, sub string, q url.Values, body any, contentType string) (*T, error) {
	if obj, isT := body.(*T); isT && obj == nil {
		body = nil // a nil object: an error, as no object is
	}
	out := new(T)
	if err := t.Client.send(ctx, &t.Resource, verb, namespace, name, sub, q, body, contentType, out); err != nil {
		return nil, err
	}
	return out, nil
}

// send is Typed.send, decoding into out, a new *T. A create of
// subresource sub is of the object body itself: its name is body's.
func (c *Client) send(ctx context.Context, r *Resource, verb, namespace, name, sub string, q url.Values, body any, contentType string, out any) error {
	if o, ok := body.(Object); ok && verb == "create" && sub != "" {
		name = o.GetObjectMeta().Name
	}
	op, err := c.newOp(ctx, r, verb, namespace, name, sub)
	if err != nil {
		return err
	}
	op.query, op.contentType = q, contentType
	// Only a get sends no body; a write needs its object.
	if body == nil && verb != "get" {
		return op.requestError(errors.New("nil object"))
	}
	if verb == "update" { // body is the *T of Update
		if body, err = c.updateBody(ctx, r, op, sub, body); err != nil {
			return err
		}
	}
	if b, ok := body.([]byte); ok {
		op.body = b
	} else if body != nil {
		if op.body, err = json.Marshal(body); err != nil {
			return op.requestError(fmt.Errorf("encode body: %w", err))
		}
	}
	resp, err := c.do(ctx, op)
	if err != nil {
		return err
	}
	data, err := readBody(op, resp, c.objectLimit)
	if err != nil {
		return err
	}
	if _, discard := out.(*struct{}); discard {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return op.decodeError(err)
	}
	// An object that embeds ObjectMeta keeps the whole JSON it was decoded
	// from, so that a later Update keeps the fields its struct does not
	// name. Only the answers of Get and Update are kept: not list items or
	// watch events, so that caches hold no second copy, nor the answers of
	// the writes a controller makes most (Create, Patch, Apply).
	if o, ok := out.(Object); ok && (verb == "get" || verb == "update") {
		o.GetObjectMeta().raw = data
	}
	return nil
}

// Get reads one object.
func (t Typed[T]) Get(ctx context.Context, namespace, name string, opts GetOptions) (*T, error) {
	return t.send(ctx, "get", namespace, name, opts.Subresource, opts.query(), nil, "")
}

// List reads one page of objects: all of them unless opts.Limit is set,
// in which case the page's Metadata.Continue, if not empty, is the
// opts.Continue for the next page.
//
// The page is decoded item by item: the body is never held whole, only
// the item being decoded is, so a page costs about its decoded size. A
// body over the client's list page limit, or one item over its object
// limit, fails with a *DecodeError wrapping [ErrBodyTooLarge].
func (t Typed[T]) List(ctx context.Context, namespace string, opts ListOptions) (*List[T], error) {
	out := new(List[T])
	err := t.Client.list(ctx, &t.Resource, namespace, &opts, &out.TypeMeta, &out.Metadata, func() any {
		out.Items = append(out.Items, *new(T))
		return &out.Items[len(out.Items)-1]
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// list is List, decoding the page's head into tm and lm, and each item
// into the new one add returns.
func (c *Client) list(ctx context.Context, r *Resource, namespace string, opts *ListOptions, tm *TypeMeta, lm *ListMeta, add func() any) error {
	op, err := c.newOp(ctx, r, "list", namespace, "", "")
	if err != nil {
		return err
	}
	op.query = opts.query(false)
	resp, err := c.do(ctx, op)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	limit := c.listLimit
	if resp.ContentLength > limit {
		return op.decodeError(fmt.Errorf("%w (list page of %d bytes, limit %d)", ErrBodyTooLarge, resp.ContentLength, limit))
	}
	lr := &limitReader{r: resp.Body, limit: limit, item: "list item", itemLimit: c.objectLimit, start: -1}
	if err := decodeList(json.NewDecoder(lr), tm, lm, add, lr); err != nil {
		return lr.fail(op, err)
	}
	return nil
}

// ServesShardSelector reports whether the server applies
// ListOptions.ShardSelector to the resource r, which must be built in,
// since the server does not echo the selector for a custom resource (see
// [ListMeta]). A Kubernetes 1.37 kube-apiserver whose ShardedListAndWatch
// feature gate is on applies it to its built-in and custom resources
// alike; one without the gate ignores it, and lists and watches every
// object. It lists at most one object of r in namespace (empty: all
// namespaces) with a selector of the whole hash space, and looks for the
// echo.
func ServesShardSelector(ctx context.Context, c *Client, r Resource, namespace string) (bool, error) {
	var lm ListMeta
	opts := ListOptions{Limit: 1, ShardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"}
	err := c.list(ctx, &r, namespace, &opts, new(TypeMeta), &lm, func() any { return new(struct{}) })
	return err == nil && lm.ShardInfo != nil, err
}

// Create creates obj and returns the server's copy. With opts.Subresource
// set (such as "eviction"), the object's own name is used, so *T must
// implement [Object].
func (t Typed[T]) Create(ctx context.Context, namespace string, obj *T, opts WriteOptions) (*T, error) {
	return t.send(ctx, "create", namespace, "", opts.Subresource, opts.query(), obj, "application/json")
}

// Update replaces the object (PUT) and returns the server's copy. Set
// obj's resourceVersion to make the update conditional: a stale one fails
// with a Conflict (see [IsConflict]). opts.Subresource "status" updates the
// status only.
//
// Update never erases a field T does not name: unless T is
// json.RawMessage, what is sent is the whole object obj was read as, with
// the changes made to obj since (fields set, changed or cleared; list
// elements matched by "name", else by position). That whole object is the
// one kept by the call that returned obj, when T embeds [ObjectMeta] and
// obj came from Get or Update; otherwise (an object from Create, Patch,
// Apply, a list, a watch or a cache, or built by hand) Update first reads
// the object, and an error of that read is returned as it is.
func (t Typed[T]) Update(ctx context.Context, namespace, name string, obj *T, opts WriteOptions) (*T, error) {
	return t.send(ctx, "update", namespace, name, opts.Subresource, opts.query(), obj, "application/json")
}

// Patch changes the object with data, interpreted as pt says, and returns
// the server's copy. [ApplyPatch] needs opts.FieldManager; opts.Force is
// only valid with it.
func (t Typed[T]) Patch(ctx context.Context, namespace, name string, pt PatchType, data []byte, opts PatchOptions) (*T, error) {
	return t.patch(ctx, namespace, name, pt, data, opts)
}

// Apply is server-side apply: it sends obj, marshalled to JSON, as an
// [ApplyPatch] and returns the server's copy. obj holds only the fields
// the caller manages, and must have apiVersion, kind and metadata.name.
// opts.FieldManager is required; opts.Force takes over fields other
// managers own.
func (t Typed[T]) Apply(ctx context.Context, namespace, name string, obj any, opts PatchOptions) (*T, error) {
	return t.patch(ctx, namespace, name, ApplyPatch, obj, opts)
}

// patch checks pt and opts, then sends body as send does.
func (t Typed[T]) patch(ctx context.Context, namespace, name string, pt PatchType, body any, opts PatchOptions) (*T, error) {
	if err := checkPatch(&t.Resource, namespace, name, pt, &opts); err != nil {
		return nil, err
	}
	return t.send(ctx, "patch", namespace, name, opts.Subresource, opts.query(), body, string(pt))
}

// checkPatch checks a patch of type pt with opts on an object of r.
func checkPatch(r *Resource, namespace, name string, pt PatchType, opts *PatchOptions) error {
	problem := ""
	switch {
	case pt != MergePatch && pt != JSONPatch && pt != StrategicMergePatch && pt != ApplyPatch:
		problem = fmt.Sprintf("unknown patch type %.64q", pt)
	case pt == ApplyPatch && opts.FieldManager == "":
		problem = "an apply patch needs a FieldManager"
	case pt != ApplyPatch && opts.Force:
		problem = "Force is only valid for an apply patch"
	}
	if problem != "" {
		return &RequestError{Op: "patch", Resource: r.Resource, Namespace: namespace, Name: name, Err: errors.New(problem)}
	}
	return nil
}

// Delete deletes the object. With opts.Preconditions it fails with a
// Conflict (see [IsConflict]) if the object changed. Deleting an object
// that is already gone fails with NotFound (see [IsNotFound]).
func (t Typed[T]) Delete(ctx context.Context, namespace, name string, opts DeleteOptions) error {
	// The body is the API's DeleteOptions object; Typed[struct{}] discards
	// the answer.
	body := struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
		DeleteOptions
	}{"DeleteOptions", "v1", opts}
	_, err := Typed[struct{}](t).send(ctx, "delete", namespace, name, "", nil, body, "application/json")
	return err
}
