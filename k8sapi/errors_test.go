package k8sapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestErrorKinds sends a get (or a create, for AlreadyExists) to a server
// answering with each recorded failure and checks the typed error.
func TestErrorKinds(t *testing.T) {
	helpers := map[string]func(error) bool{
		"IsNotFound": IsNotFound, "IsAlreadyExists": IsAlreadyExists, "IsConflict": IsConflict, "IsGone": IsGone,
		"IsForbidden": IsForbidden, "IsUnauthorized": IsUnauthorized, "IsInvalid": IsInvalid,
		"IsTooManyRequests": IsTooManyRequests, "IsServerTimeout": IsServerTimeout,
	}
	tests := []struct {
		file       string
		code       int
		contentTyp string
		is         string // the one helper that must be true
		reason     string
		msg        string // the Error() string
		retryAfter time.Duration
	}{
		{"status-404-notfound.json", 404, "", "IsNotFound", "NotFound", `k8sapi: get deployments shop/web: 404 NotFound: deployments.apps "web" not found`, 0},
		{"status-409-alreadyexists.json", 409, "", "IsAlreadyExists", "AlreadyExists", `k8sapi: get deployments shop/web: 409 AlreadyExists: deployments.apps "web" already exists`, 0},
		{"status-409-conflict.json", 409, "", "IsConflict", "Conflict", `k8sapi: get deployments shop/web: 409 Conflict: Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply your changes to the latest version and try again`, 0},
		{"status-410-expired.json", 410, "", "IsGone", "Expired", "", 0},
		{"status-403-forbidden.json", 403, "", "IsForbidden", "Forbidden", "", 0},
		{"status-401-unauthorized.json", 401, "", "IsUnauthorized", "Unauthorized", "k8sapi: get deployments shop/web: 401 Unauthorized: Unauthorized", 0},
		{"status-422-invalid.json", 422, "", "IsInvalid", "Invalid", "", 0},
		{"status-429-toomanyrequests.json", 429, "", "IsTooManyRequests", "TooManyRequests", "", 7 * time.Second},
		{"status-504-timeout.json", 504, "", "IsServerTimeout", "Timeout", "", time.Second},
		{"status-500-servertimeout.json", 500, "", "IsServerTimeout", "ServerTimeout", "", 2 * time.Second},
		{"error-500.html", 500, "text/html", "", "InternalError", "k8sapi: get deployments shop/web: 500 InternalError: <html> <head><title>500 Internal Server Error</title></head> <body> <center><h1>500 Internal Server Error</h1></center> <hr><center>nginx</center> </body> </html>", 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := testdata(t, tt.file)
			srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.contentTyp != "" {
					w.Header().Set("Content-Type", tt.contentTyp)
				}
				w.WriteHeader(tt.code)
				w.Write(body)
			})
			c, _ := newTestClient(t, srv, func(c *Config) { c.MaxRetries = -1 })
			_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want *APIError", err)
			}
			if ae.Code != tt.code || ae.reason() != tt.reason || ae.Op != "get" || ae.Resource != "deployments" || ae.Namespace != "shop" || ae.Name != "web" {
				t.Errorf("got %+v", ae)
			}
			if ae.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter %v, want %v", ae.RetryAfter, tt.retryAfter)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("Error()\n got %q\nwant %q", err.Error(), tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "k8sapi: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			for name, is := range helpers {
				if got := is(err); got != (name == tt.is) {
					t.Errorf("%s = %v", name, got)
				}
			}
		})
	}
}

func TestInvalidCauses(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 422, "status-422-invalid.json"))
	c, _ := newTestClient(t, srv, nil)
	_, err := For[Deployment](c, Deployments).Create(t.Context(), "shop", &Deployment{}, WriteOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Op != "create" || ae.Status.Details == nil || len(ae.Status.Details.Causes) != 1 ||
		ae.Status.Details.Causes[0].Field != "spec.replicas" {
		t.Fatalf("got %v", err)
	}
}

func TestHelpersOnOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("x"), &RequestError{Op: "get", Err: errors.New("x")}} {
		if IsNotFound(err) || IsGone(err) || IsConflict(err) || IsTooManyRequests(err) || IsServerTimeout(err) {
			t.Errorf("helper true for %v", err)
		}
	}
	// A Status without reason falls back on the code; a message alone
	// can mark an expired version.
	tests := []struct {
		e    *APIError
		is   func(error) bool
		want bool
	}{
		{&APIError{Code: 404}, IsNotFound, true},
		{&APIError{Code: 409}, IsConflict, true},
		{&APIError{Code: 409, Status: Status{Reason: "AlreadyExists"}}, IsConflict, false},
		{&APIError{Code: 500, Status: Status{Message: "too old resource version: 1 (2)"}}, IsGone, true},
		{&APIError{Status: Status{Reason: "Gone"}}, IsGone, true},
		{&APIError{Code: 504}, IsServerTimeout, true},
		{&APIError{Code: 429, Status: Status{Reason: "Other"}}, IsTooManyRequests, true},
	}
	for _, tt := range tests {
		if got := tt.is(tt.e); got != tt.want {
			t.Errorf("%+v: got %v", tt.e, got)
		}
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"  a\r\n\tb  ", 10, "a b"},
		{"a\x00\x1b[31mb", 20, `a\u0000\u001b[31mb`},
		{"bad \xff\xfe utf8", 20, "bad \ufffd\ufffd utf8"},
		{"héllo wörld", 6, "héllo"},
		{strings.Repeat("x", 300), 256, strings.Repeat("x", 256)},
		// The cut counts the space that joins two words, and no space
		// before the first.
		{" a", 1, "a"},
		{"ab cd", 3, "ab"},
		{"ab cd", 4, "ab c"},
	}
	for _, tt := range tests {
		if got := Printable(tt.in, tt.max); got != tt.want {
			t.Errorf("Printable(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// Escape writes what a terminal could act on as escapes a reader sees,
// and keeps the rest, other scripts and spaces included.
func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain: é 世界 ✓ a\u00a0b \\x1b", "plain: é 世界 ✓ a\u00a0b \\x1b"},
		{"\x1b]0;owned\a\x1b[2J", `\u001b]0;owned\u0007\u001b[2J`},
		{"line\nfeed\ttab\r", `line\u000afeed\u0009tab\u000d`},
		{"del\x7f c1\u0085\u009b", `del\u007f c1\u0085\u009b`},
		{"bidi\u202e\u2066 zw\u200b ls\u2028", `bidi\u202e\u2066 zw\u200b ls\u2028`},
		{"tag\U000e0041 private\U000f0000", `tag\udb40\udc41 private\udb80\udc00`},
		{"bad \xff\xc3", "bad \ufffd\ufffd"},
	}
	for _, tt := range tests {
		got := Escape(tt.in)
		if got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// Each escape is JSON's: a JSON reader gets the original back.
		if !utf8.ValidString(tt.in) || strings.ContainsAny(tt.in, `\"`) {
			continue
		}
		var back string
		if err := json.Unmarshal([]byte(`"`+got+`"`), &back); err != nil || back != tt.in {
			t.Errorf("Escape(%q) = %q reads back in JSON as %q (%v)", tt.in, got, back, err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {" 10 ", 10 * time.Second}, {"-1", 0}, {"soon", 0},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0}, {"3600", 60 * time.Second}, {"99999999999999999999", 0},
	}
	op := &operation{verb: "get"}
	for _, tt := range tests {
		if got := newAPIError(op, 429, http.Header{"Retry-After": {tt.in}}, nil).RetryAfter; got != tt.want {
			t.Errorf("Retry-After %q: RetryAfter = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestErrorStringsHideSecrets(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 403, "status-403-forbidden.json"))
	c, _ := newTestClient(t, srv, nil)
	c.creds = &countingCredentials{token: "sup3r-secret"}
	_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	if err == nil || strings.Contains(err.Error(), "sup3r-secret") || strings.Contains(err.Error(), "Bearer") {
		t.Errorf("error %q", err)
	}
}

// A Status's retryAfterSeconds wins over the Retry-After header; a Status
// without it leaves the header to say how long to wait.
func TestRetryAfterFromStatusOrHeader(t *testing.T) {
	op := &operation{verb: "get", resource: "deployments"}
	header := http.Header{"Retry-After": {"5"}}
	tests := []struct {
		name string
		body string
		want time.Duration
	}{
		{"details with retryAfterSeconds", `{"kind":"Status","code":429,"details":{"retryAfterSeconds":2}}`, 2 * time.Second},
		{"details without retryAfterSeconds", `{"kind":"Status","code":429,"details":{"name":"web"}}`, 5 * time.Second},
		{"no details", `{"kind":"Status","code":429}`, 5 * time.Second},
		{"not a Status", `busy`, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := newAPIError(op, 429, header, []byte(tt.body)).RetryAfter; got != tt.want {
			t.Errorf("%s: RetryAfter = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A long body that is not a Status is kept as its first 256 printable
// bytes.
func TestErrorSnippetOfALongBody(t *testing.T) {
	body := []byte(strings.Repeat("<p>busy</p>\n", 200))
	e := newAPIError(&operation{verb: "get", resource: "deployments"}, 503, http.Header{}, body)
	want := Printable(string(body[:1024]), 256)
	if e.Body != want || len(e.Body) != 256 || !strings.HasPrefix(e.Body, "<p>busy</p> <p>busy</p>") {
		t.Errorf("snippet %q (%d bytes), want the body's first 256 printable bytes", e.Body, len(e.Body))
	}
}
