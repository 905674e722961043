// Package faultproxy is a TCP proxy for tests that sits in front of a local
// emulator and can stall: while stalled it accepts connections and reads
// requests but forwards nothing and answers nothing, like a DynamoDB that
// stopped responding.
package faultproxy

import (
	"net"
	"sync"
)

// Proxy forwards 127.0.0.1 connections to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	resume  chan struct{}
	conns   map[net.Conn]struct{}
	closed  bool
}

// Start listens on a free 127.0.0.1 port and forwards to target (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, resume: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.resume)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns http://host:port.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Stall makes the proxy stop forwarding bytes in both directions, on open
// connections and new ones, until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.resume = make(chan struct{})
	}
}

// Resume forwards again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
	p.mu.Unlock()
	p.ln.Close()
}

func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resume
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		return
	}
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(upstream) {
		client.Close()
		return
	}
	go p.pipe(upstream, client)
	p.pipe(client, upstream)
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
