package k8sapi

import "time"

// The structs below keep only the fields the operator reads or writes.
// Fields they do not name, managedFields among them, are dropped when a
// list or a watch decodes an object, so they never sit in a cache. An
// object that Get or Update returned also keeps the JSON it was decoded
// from, so that an Update of it keeps the fields its struct lacks without
// reading it again (see [Typed.Update]). Use json.RawMessage to pass a
// whole object through.

// TypeMeta is an object's apiVersion and kind.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// ObjectMeta is the metadata every object has.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	OwnerReferences   []OwnerReference  `json:"ownerReferences,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`

	// raw is the whole object this one was decoded from, when Get or
	// Update returned it; see [Typed.Update].
	raw []byte
}

// GetObjectMeta returns m itself, so that any struct embedding ObjectMeta
// satisfies [Object].
func (m *ObjectMeta) GetObjectMeta() *ObjectMeta { return m }

// Object is any typed object that embeds ObjectMeta.
type Object interface {
	GetObjectMeta() *ObjectMeta
}

// OwnerReference points from a dependent object to its owner.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ControllerOf returns the owner reference marked controller: true, or nil.
func (m *ObjectMeta) ControllerOf() *OwnerReference {
	for i := range m.OwnerReferences {
		if c := m.OwnerReferences[i].Controller; c != nil && *c {
			return &m.OwnerReferences[i]
		}
	}
	return nil
}

// ListMeta is a list's metadata.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Continue        string `json:"continue,omitempty"`
	// ShardInfo echoes the ListOptions.ShardSelector that the server
	// applied. Nil when it applied none, and, as of Kubernetes 1.37, for a
	// custom resource, which the server filters without saying so.
	ShardInfo *ShardInfo `json:"shardInfo,omitempty"`
}

// ShardInfo is the shard selector that a list page answers.
type ShardInfo struct {
	Selector string `json:"selector"`
}

// List is one page of a list response.
type List[T any] struct {
	TypeMeta
	Metadata ListMeta `json:"metadata"`
	Items    []T      `json:"items"`
}

// Condition is a standard Kubernetes status condition.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"` // "True", "False" or "Unknown"
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
}

// Status is the server's metav1.Status: the body of most error responses.
type Status struct {
	TypeMeta
	Status  string         `json:"status,omitempty"` // "Success" or "Failure"
	Message string         `json:"message,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Details *StatusDetails `json:"details,omitempty"`
	Code    int32          `json:"code,omitempty"`
}

// StatusDetails says which object a Status is about.
type StatusDetails struct {
	Name              string        `json:"name,omitempty"`
	Group             string        `json:"group,omitempty"`
	Kind              string        `json:"kind,omitempty"`
	UID               string        `json:"uid,omitempty"`
	Causes            []StatusCause `json:"causes,omitempty"`
	RetryAfterSeconds int32         `json:"retryAfterSeconds,omitempty"`
}

// StatusCause is one reason a request failed, such as one invalid field.
type StatusCause struct {
	Type    string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
}

// LabelSelector selects objects by label.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// Deployment is apps/v1 Deployment, reduced.
type Deployment struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       DeploymentSpec   `json:"spec"`
	Status     DeploymentStatus `json:"status"`
}

// DeploymentSpec is the part of a Deployment's spec the operator sets.
type DeploymentSpec struct {
	Replicas *int32          `json:"replicas,omitempty"`
	Selector *LabelSelector  `json:"selector,omitempty"`
	Template PodTemplateSpec `json:"template"`
}

// DeploymentStatus is the part of a Deployment's status the operator reads.
type DeploymentStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	Replicas           int32 `json:"replicas,omitempty"`
	UpdatedReplicas    int32 `json:"updatedReplicas,omitempty"`
	ReadyReplicas      int32 `json:"readyReplicas,omitempty"`
	AvailableReplicas  int32 `json:"availableReplicas,omitempty"`
	// Conditions are Available, Progressing and ReplicaFailure.
	Conditions []Condition `json:"conditions,omitempty"`
}

// PodTemplateSpec is a Deployment's pod template.
type PodTemplateSpec struct {
	ObjectMeta `json:"metadata"`
	Spec       PodSpec `json:"spec"`
}

// PodSpec is the part of a pod spec the operator sets.
type PodSpec struct {
	Containers []Container `json:"containers"`
}

// Container is one container of a pod.
type Container struct {
	Name  string          `json:"name"`
	Image string          `json:"image,omitempty"`
	Ports []ContainerPort `json:"ports,omitempty"`
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// Service is core/v1 Service, reduced.
type Service struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       ServiceSpec `json:"spec"`
}

// ServiceSpec is the part of a Service's spec the operator sets.
type ServiceSpec struct {
	Type      string            `json:"type,omitempty"`
	Selector  map[string]string `json:"selector,omitempty"`
	Ports     []ServicePort     `json:"ports,omitempty"`
	ClusterIP string            `json:"clusterIP,omitempty"`
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name       string      `json:"name,omitempty"`
	Protocol   string      `json:"protocol,omitempty"`
	Port       int32       `json:"port"`
	TargetPort IntOrString `json:"targetPort,omitzero"`
}

// Event is events.k8s.io/v1 Event, reduced.
type Event struct {
	TypeMeta
	ObjectMeta          `json:"metadata"`
	EventTime           MicroTime       `json:"eventTime"`
	Series              *EventSeries    `json:"series,omitempty"`
	ReportingController string          `json:"reportingController,omitempty"`
	ReportingInstance   string          `json:"reportingInstance,omitempty"`
	Action              string          `json:"action,omitempty"`
	Reason              string          `json:"reason,omitempty"`
	Regarding           ObjectReference `json:"regarding"`
	Note                string          `json:"note,omitempty"`
	Type                string          `json:"type,omitempty"` // "Normal" or "Warning"
}

// EventSeries counts repeats of an Event.
type EventSeries struct {
	Count            int32     `json:"count"`
	LastObservedTime MicroTime `json:"lastObservedTime"`
}

// ObjectReference points at an object, as an Event's regarding field does.
type ObjectReference struct {
	APIVersion      string `json:"apiVersion,omitempty"`
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// MicroTime is a time with microsecond precision, as the API writes it
// (RFC 3339 with six fractional digits). It decodes as time.Time does (an
// RFC 3339 time, or null for none).
type MicroTime struct{ time.Time }

const microTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// MarshalJSON writes the time in UTC with microseconds.
func (t MicroTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(microTimeLayout) + `"`), nil
}

// Lease is coordination.k8s.io/v1 Lease, reduced.
type Lease struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       LeaseSpec `json:"spec"`
}

// LeaseSpec is a Lease's holder and timing.
type LeaseSpec struct {
	HolderIdentity       *string    `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds *int32     `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          *MicroTime `json:"acquireTime,omitempty"`
	RenewTime            *MicroTime `json:"renewTime,omitempty"`
	LeaseTransitions     *int32     `json:"leaseTransitions,omitempty"`
}
