// Package awscount counts the AWS requests an SDK client makes, by service
// and operation, with a middleware: the benchmarks turn the counts into
// requests (and dollars) per job.
package awscount

import (
	"context"
	"sort"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts requests. The zero value is ready to use.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// APIOption is the option to add to a client's APIOptions
// (dynamodb.Options.APIOptions, sqs.Options.APIOptions,
// eventbridge.Options.APIOptions).
func (c *Counter) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("awscount",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.add(awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (c *Counter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[key]++
}

// Counts returns a copy of the counts, keyed "Service.Operation".
func (c *Counter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Keys returns the counted operations, sorted.
func (c *Counter) Keys() []string {
	counts := c.Counts()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Reset forgets every count.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.counts = nil
	c.mu.Unlock()
}
