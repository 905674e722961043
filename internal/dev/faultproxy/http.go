package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Faults are the rates (0..1) at which an HTTPProxy misbehaves, per request.
type Faults struct {
	// Throttle answers 400 ThrottlingException without forwarding.
	Throttle float64
	// ServerError answers 500 without forwarding.
	ServerError float64
	// LostResponse forwards the request, then answers 500 instead of the
	// real response: the write happened, the caller thinks it did not.
	LostResponse float64
	// Slow delays the request by SlowBy before forwarding it.
	Slow   float64
	SlowBy time.Duration
	// Stall holds the request without an answer until the caller gives up.
	Stall float64
	// TransactConflict and TransactThrottle answer a share of DynamoDB
	// TransactWriteItems requests, without forwarding them, with the
	// TransactionCanceledException DynamoDB gives when another transaction
	// holds an item (reason TransactionConflict) or when it throttles
	// inside a transaction (ThrottlingError). DynamoDB Local serialises
	// transactions and never answers either. Drawn independently of the
	// rates above.
	TransactConflict, TransactThrottle float64
}

// Stats counts what an HTTPProxy did.
type Stats struct {
	Requests, Throttled, ServerErrors, LostResponses, Slowed, Stalled int64
	// Transactions counts TransactWriteItems requests; Conflicts and
	// TransactThrottled those cancelled by the proxy.
	Transactions, Conflicts, TransactThrottled int64
}

// HTTPProxy is a fault-injecting reverse proxy in front of DynamoDB Local or
// fauxqs, for reliability tests of processes that cannot take an SDK
// middleware (the bootstraps under the Runtime Interface Emulator).
type HTTPProxy struct {
	ln     net.Listener
	srv    *http.Server
	target *url.URL
	proxy  *httputil.ReverseProxy

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand
	hold   func(target string, body []byte) bool

	requests, throttled, serverErrors, lost, slowed, stalled atomic.Int64
	transactions, conflicts, txThrottled                     atomic.Int64
	stop                                                     chan struct{}
}

// StartHTTP starts a proxy on a free 127.0.0.1 port in front of target
// (http://host:port), injecting nothing until SetFaults.
func StartHTTP(target string, seed uint64) (*HTTPProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &HTTPProxy{ln: ln, target: u, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), stop: make(chan struct{})}
	p.proxy = httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL returns the proxy's address.
func (p *HTTPProxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetFaults changes the fault rates.
func (p *HTTPProxy) SetFaults(f Faults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
}

// SetHold makes the proxy call hold with each request's X-Amz-Target and
// body before it forwards the request: hold may block, keeping the request
// in flight (a test kills a worker while its write is on the wire), and
// returns whether to forward it (false: it is dropped, answered 500, as a
// request whose sender died before it reached the service). nil stops it.
func (p *HTTPProxy) SetHold(hold func(target string, body []byte) (forward bool)) {
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
}

// Stats returns what the proxy did so far.
func (p *HTTPProxy) Stats() Stats {
	return Stats{p.requests.Load(), p.throttled.Load(), p.serverErrors.Load(), p.lost.Load(), p.slowed.Load(), p.stalled.Load(),
		p.transactions.Load(), p.conflicts.Load(), p.txThrottled.Load()}
}

// Close stops the proxy and releases stalled requests.
func (p *HTTPProxy) Close() {
	close(p.stop)
	_ = p.srv.Close()
}

func (p *HTTPProxy) draw() (f Faults, r float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults, p.rng.Float64()
}

// ServeHTTP forwards the request, or misbehaves.
func (p *HTTPProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.mu.Lock()
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "SerializationException", "unreadable body")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !hold(r.Header.Get("X-Amz-Target"), body) {
			writeError(w, http.StatusInternalServerError, serverErrorType(strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB")), "Request dropped (injected)")
			return
		}
	}
	f, x := p.draw()
	dynamo := strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB")
	if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.TransactWriteItems" {
		p.transactions.Add(1)
		if _, y := p.draw(); y < f.TransactConflict+f.TransactThrottle {
			reason := "TransactionConflict"
			if y >= f.TransactConflict {
				reason = "ThrottlingError"
				p.txThrottled.Add(1)
			} else {
				p.conflicts.Add(1)
			}
			cancelTransaction(w, r, reason)
			return
		}
	}
	switch {
	case x < f.Throttle:
		p.throttled.Add(1)
		writeError(w, http.StatusBadRequest, throttleType(dynamo), "Rate exceeded (injected)")
		return
	case x < f.Throttle+f.ServerError:
		p.serverErrors.Add(1)
		writeError(w, http.StatusInternalServerError, serverErrorType(dynamo), "Internal server error (injected)")
		return
	case x < f.Throttle+f.ServerError+f.Stall:
		p.stalled.Add(1)
		select {
		case <-r.Context().Done():
		case <-p.stop:
		}
		return
	case x < f.Throttle+f.ServerError+f.Stall+f.Slow:
		p.slowed.Add(1)
		select {
		case <-time.After(f.SlowBy):
		case <-r.Context().Done():
			return
		}
	case x < f.Throttle+f.ServerError+f.Stall+f.Slow+f.LostResponse:
		p.lost.Add(1)
		rec := &discard{header: http.Header{}}
		p.proxy.ServeHTTP(rec, r)
		writeError(w, http.StatusInternalServerError, serverErrorType(dynamo), "Internal server error after the write (injected)")
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// cancelTransaction answers as DynamoDB does when it cancels a
// transaction: 400 TransactionCanceledException with one reason per item,
// reason on the last (the batch's shared item) and None on the others.
func cancelTransaction(w http.ResponseWriter, r *http.Request, reason string) {
	var in struct{ TransactItems []json.RawMessage }
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &in)
	n := max(1, len(in.TransactItems))
	type cr struct {
		Code    string
		Message string `json:",omitempty"`
	}
	reasons := make([]cr, n)
	codes := make([]string, n)
	for i := range reasons {
		reasons[i], codes[i] = cr{Code: "None"}, "None"
	}
	reasons[n-1] = cr{Code: reason, Message: "injected by the fault proxy"}
	codes[n-1] = reason
	out, _ := json.Marshal(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(out)
}

func throttleType(dynamo bool) string {
	if dynamo {
		return "com.amazonaws.dynamodb.v20120810#ThrottlingException"
	}
	return "com.amazonaws.sqs#RequestThrottled"
}

func serverErrorType(dynamo bool) string {
	if dynamo {
		return "com.amazonaws.dynamodb.v20120810#InternalServerError"
	}
	return "com.amazonaws.sqs#InternalError"
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Query-Error", strings.TrimPrefix(typ[strings.LastIndexByte(typ, '#')+1:], "")+";Receiver")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":%q,"message":%q}`, typ, msg)
}

// discard swallows a response.
type discard struct {
	header http.Header
	body   bytes.Buffer
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return d.body.Write(b) }
func (d *discard) WriteHeader(int)             {}

var _ io.Writer = (*discard)(nil)
