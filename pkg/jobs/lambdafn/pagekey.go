package lambdafn

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// The page token key signs the listing's page and continuation tokens
// (jobs.Config.PageTokenKey). Every instance of getjob and cancel
// must share it: deployed, it is a Secrets Manager secret the construct
// generates (JOBS_PAGE_TOKEN_SECRET, read at cold start by those two
// functions only); locally a string (JOBS_PAGE_TOKEN_KEY, 32 characters or
// more). It protects no data: a leaked key lets a caller forge tokens for
// their own listings only, since the owner is checked on every job read.

// pageKeyFrom derives the key from the secret string.
func pageKeyFrom(s string) ([]byte, error) {
	if len(s) < 32 {
		return nil, errors.New("the page token secret must be at least 32 characters")
	}
	sum := sha256.Sum256([]byte("lambdajobs page token key v1\x00" + s))
	return sum[:], nil
}

// pageKey returns the page token key of a function that lists: from the
// environment, or read from its secret once.
func (d *Deps) pageKey(ctx context.Context) ([]byte, error) {
	switch {
	case d.Config.PageTokenKey != "":
		return pageKeyFrom(d.Config.PageTokenKey)
	case d.Config.PageTokenSecret == "":
		return nil, fmt.Errorf("listing needs %s (the construct sets it) or %s", deploy.EnvPageTokenSecret.Name, deploy.EnvPageTokenKey.Name)
	}
	if d.pageKeyBytes == nil {
		began := time.Now()
		str, err := d.secrets(ctx, d.Config.PageTokenSecret)
		d.setup.secretsRead(time.Since(began))
		if err != nil {
			return nil, fmt.Errorf("read the page token secret %s: %w", d.Config.PageTokenSecret, err)
		}
		k, err := pageKeyFrom(str)
		if err != nil {
			return nil, fmt.Errorf("page token secret %s: %w", d.Config.PageTokenSecret, err)
		}
		d.pageKeyBytes = k
	}
	return d.pageKeyBytes, nil
}
