package wire_test

import (
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/wire"
)

func TestMessageSort(t *testing.T) {
	for body, want := range map[string]string{
		`{"job_id":"x"}`:                                                      wire.SortJob,
		`{"job_id":"x","kind":"k"}`:                                           wire.SortEnvelopeWithoutKey,
		`{"job_id":5}`:                                                        wire.SortOther,
		wire.FireMessage("n", "t"):                                            wire.SortFire,
		wire.RuntimeFireMessage("o", "n", "t"):                                wire.SortFire,
		`{"Records":[{"eventSource":"aws:s3"}]}`:                              wire.SortS3,
		`{"Service":"Amazon S3","Event":"s3:TestEvent"}`:                      wire.SortS3,
		`{"id":"1","source":"s","detail-type":"d","detail":{}}`:               wire.SortEventBridge,
		`{"Type":"Notification","TopicArn":"arn:t","Message":"{\"kind\":1}"}`: wire.SortSNS,
		`{"kind":"k","payload":{},"idempotency_key":"a"}`:                     wire.SortEnvelope,
		`{"kind":"k","payload":{}}`:                                           wire.SortEnvelopeWithoutKey,
		`{"kind":"k","idempotency_key":""}`:                                   wire.SortEnvelopeWithoutKey,
		`not json`:                                                            wire.SortOther,
		`[1]`:                                                                 wire.SortOther,
		`{}`:                                                                  wire.SortOther,
	} {
		if got := wire.MessageSort(body); got != want {
			t.Errorf("MessageSort(%s) = %q, want %q", body, got, want)
		}
	}
}
