package testenv

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
)

// SyncBuffer is a bytes.Buffer that goroutines and processes may write to
// while a test reads it: a logger's or a stack's output.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tail returns the last n bytes written (all of them when fewer).
func (s *SyncBuffer) Tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// stackLogTail is how much of a stack's output a failed test logs.
const stackLogTail = 20000

// StartStack starts a local stack (localstack.Start) for the test, and
// stops it when the test and its subtests have ended (t.Cleanup). The
// stack's output goes to cfg.Output, if set, and to the SyncBuffer it
// returns; a failed start, and a failed test, log its last 20 KB.
func StartStack(t testing.TB, ctx context.Context, cfg localstack.Config) (*localstack.Stack, *SyncBuffer) {
	t.Helper()
	out := &SyncBuffer{}
	if cfg.Output != nil {
		cfg.Output = io.MultiWriter(cfg.Output, out)
	} else {
		cfg.Output = out
	}
	stack, err := localstack.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start the local stack: %v\nits output (last 20 KB):\n%s", err, out.Tail(stackLogTail))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack output (last 20 KB):\n%s", out.Tail(stackLogTail))
		}
		stack.Stop()
	})
	return stack, out
}

// StartDynamoDB starts a DynamoDB Local of the test's own (one the test
// puts a fault proxy in front of, say; DynamoDBEndpoint shares one), and
// stops it when the test has ended.
func StartDynamoDB(t testing.TB, ctx context.Context, o localaws.Options) *localaws.Process {
	t.Helper()
	p, err := localaws.StartDynamoDB(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// StartSQS starts a fauxqs of the test's own and stops it when the test
// has ended.
func StartSQS(t testing.TB, ctx context.Context, o localaws.Options) *localaws.Process {
	t.Helper()
	p, err := localaws.StartSQS(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}
