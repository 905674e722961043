package lambdafn

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// getjob and cancel read the page token key from its secret at cold start
// (moto_server standing in for Secrets Manager): every instance derives
// the same key from the same value; a short value or a missing secret
// keeps the function from starting, naming the secret.
func TestPageTokenSecretAtColdStart(t *testing.T) {
	sm, endpoint := motoSecretsAt(t)
	ctx := context.Background()
	for name, value := range map[string]string{"pages": strings.Repeat("p", 48), "short": "too short"} {
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	deps := func(secret string) *Deps {
		cfg, err := ConfigFromEnv(func(k string) string {
			return map[string]string{"JOBS_TABLE": "t", "JOBS_PAGE_TOKEN_SECRET": secret}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		d, err := newDepsFromEnv(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, err := deps("pages").pageKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := deps("pages").pageKey(ctx)
	want, _ := pageKeyFrom(strings.Repeat("p", 48))
	if !bytes.Equal(a, b) || !bytes.Equal(a, want) || len(a) != 32 {
		t.Fatalf("two cold starts derived %x and %x", a, b)
	}
	if _, err := GetJob(deps("pages"), jobs.NewRegistry()); err != nil {
		t.Fatalf("getjob with its page token secret: %v", err)
	}
	for _, secret := range []string{"short", "missing"} {
		if _, err := GetJob(deps(secret), jobs.NewRegistry()); err == nil || !strings.Contains(err.Error(), secret) {
			t.Fatalf("getjob with the %s secret: %v", secret, err)
		}
	}
}
