package jobsinfra

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/s3objects"
)

// The parts bucket exists only with JobsProps.LargeParts: encrypted (with
// the customer-managed key and a bucket key when there is one), public
// access blocked, objects owned by the account, TLS only, its objects'
// data denied to every principal but the roles the descriptor grants
// them, a lifecycle rule per lifetime tag and one that aborts unfinished
// writes; the functions that read JOBS_BUCKET are told it. Without
// LargeParts there is no bucket, no S3 grant and no JOBS_BUCKET.
func TestPartsBucket(t *testing.T) {
	plain := synth(t, DevConfig("noparts"), nil)
	if n := len(plain.of("AWS::S3::Bucket")); n != 0 {
		t.Fatalf("without LargeParts: %d buckets, want none", n)
	}
	if strings.Contains(jsonString(plain.raw), "s3:PutObject") || strings.Contains(jsonString(plain.raw), "JOBS_BUCKET") {
		t.Fatal("without LargeParts a role may write objects, or a function is told a bucket")
	}
	for _, cmk := range []bool{false, true} {
		cfg := DevConfig("parts" + strconv.FormatBool(cmk))
		cfg.CustomerManagedKey = cmk
		if cmk {
			cfg.CORS = &CORSConfig{AllowOrigins: []string{"https://app.example.com"}}
		}
		s := synthProps(t, &JobsProps{Config: cfg, LargeParts: true}, nil)
		buckets := s.of("AWS::S3::Bucket")
		if len(buckets) != 1 {
			t.Fatalf("cmk %v: %d buckets, want 1", cmk, len(buckets))
		}
		id := s.id(s.jobs.Parts)
		b := buckets[id].Properties
		enc := jsonString(b["BucketEncryption"])
		switch {
		case !cmk && !strings.Contains(enc, `"SSEAlgorithm":"AES256"`):
			t.Errorf("encryption %s, want S3's", enc)
		case cmk && (!strings.Contains(enc, `"SSEAlgorithm":"aws:kms"`) || !strings.Contains(enc, s.id(s.jobs.Key)) || !strings.Contains(enc, `"BucketKeyEnabled":true`)):
			t.Errorf("encryption %s, want the customer-managed key with a bucket key", enc)
		}
		if got := jsonString(b["PublicAccessBlockConfiguration"]); got != `{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}` {
			t.Errorf("public access block %s", got)
		}
		if got := jsonString(b["OwnershipControls"]); !strings.Contains(got, "BucketOwnerEnforced") {
			t.Errorf("ownership %s", got)
		}
		// With the API's CORS, a browser on its origins may PUT a part
		// and read its ETag; without, no browser may.
		want := `{"CorsRules":[{"AllowedHeaders":["content-type"],"AllowedMethods":["PUT"],"AllowedOrigins":["https://app.example.com"],"ExposedHeaders":["ETag"],"MaxAge":3600}]}`
		if got := jsonString(b["CorsConfiguration"]); (got == want) != cmk || (!cmk && got != "null") {
			t.Errorf("cmk %v: CORS %s", cmk, got)
		}
		rules := b["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
		var keeps []int
		uploads := false
		for _, r := range rules {
			r := r.(map[string]any)
			if r["Id"] == "abort-unfinished-writes" {
				if jsonString(r["AbortIncompleteMultipartUpload"]) != `{"DaysAfterInitiation":1}` {
					t.Errorf("abort rule %s", jsonString(r))
				}
				continue
			}
			if r["Id"] == "uploads-1-day" {
				// What a worker did not validate and delete goes after a
				// day, whatever its tags.
				uploads = r["Prefix"] == uploadsPrefix && r["ExpirationInDays"] == float64(1) && r["Status"] == "Enabled" && r["TagFilters"] == nil
				continue
			}
			tags := r["TagFilters"].([]any)
			tag := tags[0].(map[string]any)
			days, _ := strconv.Atoi(tag["Value"].(string))
			if len(tags) != 1 || tag["Key"] != s3objects.TagKeep || r["Prefix"] != partsPrefix || r["ExpirationInDays"] != float64(days) || r["Status"] != "Enabled" {
				t.Errorf("lifecycle rule %s", jsonString(r))
			}
			keeps = append(keeps, days)
		}
		if !uploads {
			t.Errorf("no rule expires uploads/ after a day: %s", jsonString(rules))
		}
		if !slices.Equal(keeps, s3objects.KeepDays) {
			t.Errorf("lifecycle rules keep %v days, want %v", keeps, s3objects.KeepDays)
		}

		policy, err := s.t.resourcePolicy(id)
		if err != nil {
			t.Fatal(err)
		}
		var tls, only bool
		for _, st := range asList(policy["Statement"]) {
			st := st.(map[string]any)
			cond := jsonString(st["Condition"])
			switch {
			case st["Effect"] == "Deny" && strings.Contains(cond, `"aws:SecureTransport":"false"`):
				tls = true
			case st["Sid"] == "OnlyItsRoles":
				only = true
				var users []string
				for _, r := range st["Condition"].(map[string]any)["ArnNotLike"].(map[string]any)["aws:PrincipalArn"].([]any) {
					users = append(users, r.(string))
				}
				var want []string
				for _, fn := range []string{deploy.Enqueue, deploy.GetJob, deploy.WaitJob, deploy.Cancel, deploy.Worker, deploy.Sweeper} {
					want = append(want, "arn:aws:iam::"+testAccount+":role/"+s.id(s.jobs.Functions[fn].Role()))
				}
				sort.Strings(users)
				sort.Strings(want)
				if !slices.Equal(users, want) || st["Effect"] != "Deny" || jsonString(st["Principal"]) != `{"AWS":"*"}` {
					t.Errorf("the objects' data is open to %v, want only %v", users, want)
				}
			}
		}
		if !tls || !only {
			t.Errorf("bucket policy %s: want TLS only and only its roles", jsonString(policy))
		}
		for _, fn := range deploy.FunctionNames() {
			env := jsonString(s.t.resources[s.id(s.jobs.Functions[fn])].Properties["Environment"])
			if told := strings.Contains(env, `"JOBS_BUCKET":{"Ref":"`+id+`"}`); told != slices.Contains(deploy.EnvBucket.Readers, fn) {
				t.Errorf("%s told the bucket: %v; it reads JOBS_BUCKET: %v", fn, told, !told)
			}
		}
		if cmk {
			key, err := s.t.resourcePolicy(s.id(s.jobs.Key))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(jsonString(key), "s3.us-east-1.amazonaws.com") {
				t.Errorf("the key may not be used through S3: %s", jsonString(key))
			}
		}
	}
}
