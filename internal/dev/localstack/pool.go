package localstack

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrThrottled is a pool's answer when every instance it may run is busy:
// Lambda's throttle at a function's reserved concurrency, which API
// Gateway answers with a 500.
var ErrThrottled = errors.New("localstack: every instance is busy (throttled)")

// Pool runs a function as Lambda scales one: an invocation takes an idle
// instance, or starts one more (a cold start) while there are fewer than
// Max, or is throttled. An instance serves one invocation at a time (the
// emulator's) and stays for the next.
type Pool struct {
	Name string
	// Max is the function's reserved concurrency.
	Max int
	// Start starts one more instance.
	Start func(ctx context.Context) (*Function, error)

	mu      sync.Mutex
	idle    []*Function
	all     []*Function
	running int
	stopped bool
}

// Invoke implements Invoker. A caller that gives up (its request ended)
// does not end the invocation, as in Lambda: the instance goes back to
// the pool only when its invocation has returned (the emulator takes one
// at a time), bounded by the function's timeout.
func (p *Pool) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	type answer struct {
		out []byte
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer p.put(f)
		out, err := f.Invoke(context.WithoutCancel(ctx), payload)
		done <- answer{out, err}
	}()
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// take returns an idle instance, or a new one, or ErrThrottled.
func (p *Pool) take(ctx context.Context) (*Function, error) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: stopped", p.Name)
	}
	if n := len(p.idle); n > 0 {
		f := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return f, nil
	}
	if p.running >= p.Max {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", p.Name, ErrThrottled)
	}
	p.running++
	p.mu.Unlock()
	f, err := p.Start(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.running--
		return nil, err
	}
	p.all = append(p.all, f)
	if p.stopped {
		f.Stop()
		return nil, fmt.Errorf("%s: stopped", p.Name)
	}
	return f, nil
}

func (p *Pool) put(f *Function) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, f)
}

// Instances is how many instances the pool has started.
func (p *Pool) Instances() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// Stop stops every instance.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.stopped = true
	all := p.all
	p.mu.Unlock()
	for _, f := range all {
		f.Stop()
	}
}
