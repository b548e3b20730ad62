package controlplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// AuditEvent is one line of the apiserver's audit log, with the fields
// tests count requests by.
type AuditEvent struct {
	AuditID string
	// Stage is "ResponseComplete" for most requests; a watch or other long
	// request also logs "ResponseStarted" under the same AuditID, and a
	// request that panicked logs "Panic".
	Stage       string
	User        string
	Groups      []string
	UserAgent   string
	Verb        string // get, list, watch, create, update, patch, delete, ...
	RequestURI  string
	APIGroup    string // "" for the core group
	APIVersion  string
	Resource    string // "configmaps"; empty for a non-resource URL
	Subresource string // "status", "token", ...
	Namespace   string
	Name        string
	Code        int // HTTP status code; 0 when the stage has none yet
	Received    time.Time
	Timestamp   time.Time // when the stage was reached
}

// auditLine is the part of an audit.k8s.io/v1 Event that AuditEvent keeps.
type auditLine struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// ParseAuditLog reads JSON-lines audit events. A line that is not valid
// JSON (such as the last, half-written line of a live log) is an error
// naming its line number, returned with the events before it.
func ParseAuditLog(r io.Reader) ([]AuditEvent, error) {
	var events []AuditEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return events, fmt.Errorf("controlplane: audit log line %d: %w", n, err)
		}
		e := AuditEvent{
			AuditID:    l.AuditID,
			Stage:      l.Stage,
			User:       l.User.Username,
			Groups:     l.User.Groups,
			UserAgent:  l.UserAgent,
			Verb:       l.Verb,
			RequestURI: l.RequestURI,
			Received:   l.RequestReceivedTimestamp,
			Timestamp:  l.StageTimestamp,
		}
		if o := l.ObjectRef; o != nil {
			e.Resource, e.Subresource, e.Namespace, e.Name = o.Resource, o.Subresource, o.Namespace, o.Name
			e.APIGroup, e.APIVersion = o.APIGroup, o.APIVersion
		}
		if l.ResponseStatus != nil {
			e.Code = l.ResponseStatus.Code
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return events, fmt.Errorf("controlplane: audit log: %w", err)
	}
	return events, nil
}

// AuditEvents parses the plane's audit log as it is now. The apiserver
// writes an event as the response completes, so a request that a client
// has just seen answered may take a moment to appear: poll with a
// deadline rather than read once.
func (p *Plane) AuditEvents() ([]AuditEvent, error) {
	data, err := os.ReadFile(p.auditLog)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// The last line of a live log may be half written: leave it for the
	// next read.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	return ParseAuditLog(bytes.NewReader(data))
}

// AuditLogPath returns the path of the audit log.
func (p *Plane) AuditLogPath() string { return p.auditLog }

// CountRequests counts the distinct requests (by AuditID) among events
// for which match returns true. A nil match counts them all.
func CountRequests(events []AuditEvent, match func(AuditEvent) bool) int {
	seen := map[string]bool{}
	for _, e := range events {
		if match != nil && !match(e) {
			continue
		}
		seen[e.AuditID] = true
	}
	return len(seen)
}
