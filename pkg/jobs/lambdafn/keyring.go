package lambdafn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// The payload key ring in Secrets Manager.
//
// JOBS_PAYLOAD_KEYRING_SECRET names a secret (ARN or name) that the
// functions which seal or open payloads (enqueue, worker, and a team's own
// function given GrantEnqueue) read once, at cold start, with
// GetSecretValue; no key material is in any environment variable or
// template, and the functions that never seal or open (getjob, cancel,
// sweeper) neither read it nor may. Its value is one secret string of 32 or
// more characters (what the CDK construct generates), or a ring, newest
// first:
//
//	{"keys": ["<new, 32+ characters>", "<old>"]}
//
// Each string gives an AES-256 key (SHA-256 of it). A ring may also name
// keys that open but never seal, for the first phase of a rotation:
//
//	{"keys": ["<current>"], "decrypt_only": ["<new>"]}
//
// Rotation is two phases, each a deploy that replaces every execution
// environment (functions read the ring at cold start only): first add the
// new string as decrypt_only, so every instance can open what it will
// seal; then promote it, {"keys": ["<new>", "<old>"]}. Sealing with a key
// that some warm instance lacks (a one-phase rotation) would leave jobs
// that instance cannot open; those are handed back (waiting_on "key") for
// 30 minutes after their creation, then fail payload_unreadable. Keep the
// old string until the jobs sealed with it have expired (the retention),
// then drop it. Jobs sealed with the old key still run, and idempotent
// retries still match (request hashes use the ring's oldest key and name
// it; a decrypt-only key never keys them).

// LoadKeyRing reads the key ring secret (an ARN or a name) with the SDK's
// Secrets Manager client of cfg, and returns its sealer.
func LoadKeyRing(ctx context.Context, cfg aws.Config, secret string) (*jobs.AESSealer, error) {
	c := secretsmanager.NewFromConfig(cfg)
	return loadKeyRing(ctx, func(ctx context.Context, id string) (string, error) { return secretString(ctx, c, id) }, secret)
}

// loadKeyRing is LoadKeyRing, reading the secret with read.
func loadKeyRing(ctx context.Context, read func(ctx context.Context, id string) (string, error), secret string) (*jobs.AESSealer, error) {
	str, err := read(ctx, secret)
	if err != nil {
		return nil, fmt.Errorf("read the payload key ring %s: %w", secret, err)
	}
	strs, openOnly, err := parseKeyRing(str)
	if err != nil {
		return nil, fmt.Errorf("payload key ring %s: %w", secret, err)
	}
	// NewAESSealer seals with its first key, opens with all, and keys
	// request hashes with its last: decrypt-only keys go after the first,
	// and the ring's oldest key stays last (repeated when it is the only
	// one).
	order := append([]string{strs[0]}, openOnly...)
	order = append(order, strs[1:]...)
	if len(openOnly) > 0 && len(strs) == 1 {
		order = append(order, strs[0])
	}
	keys := make([][]byte, len(order))
	for i, s := range order {
		keys[i] = keyFromSecret(s)
	}
	return jobs.NewAESSealer(keys...)
}

// parseKeyRing reads one secret string, or {"keys": [...]} newest first
// with an optional "decrypt_only" list.
func parseKeyRing(v string) (keys, openOnly []string, err error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		var ring struct {
			Keys        []string `json:"keys"`
			DecryptOnly []string `json:"decrypt_only"`
		}
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ring); err != nil {
			return nil, nil, errors.New(`want one secret string or {"keys": ["newest", ...], "decrypt_only": [...]}`)
		}
		keys, openOnly = ring.Keys, ring.DecryptOnly
	} else if v != "" {
		keys = []string{v}
	}
	if len(keys) == 0 {
		return nil, nil, errors.New("no key")
	}
	for i, s := range append(slices.Clone(keys), openOnly...) {
		if len(s) < 32 {
			return nil, nil, fmt.Errorf("key %d is %d characters, want 32 or more", i+1, len(s))
		}
	}
	return keys, openOnly, nil
}

// keyFromSecret derives an AES-256 key from a secret string (the same
// derivation as JOBS_PAYLOAD_SECRET).
func keyFromSecret(s string) []byte {
	sum := sha256.Sum256([]byte("lambdajobs payload key v1\x00" + s))
	return sum[:]
}

// noKey is the sealer of the functions that never seal or open payloads
// (getjob, cancel): they run without the key, and would refuse to use one.
type noKey struct{ hash []byte }

func newNoKey() noKey {
	h := make([]byte, 32)
	_, _ = rand.Read(h)
	return noKey{hash: h}
}

var errNoKey = errors.New("this function holds no payload key")

func (noKey) Seal([]byte, []byte) (string, error) { return "", errNoKey }
func (noKey) Open(string, []byte) ([]byte, error) { return nil, errNoKey }
func (k noKey) RequestHashKey() []byte            { return k.hash }
