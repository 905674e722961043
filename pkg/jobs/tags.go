package jobs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Tags: an enqueue may carry up to maxTags tags (EnqueueOpts.Tags), each a
// key and a value; the job view shows them, and Service.List and
// Service.Bulk select the jobs of one tag (ListRequest.Tag, "key=value").
// A store keeps each tag of a job in an index of its own (dynamostore: one
// index per tag a job may carry), so a listing by tag reads the tagged
// jobs and never the others. Tags are plain text, shown to whoever can
// read the job: never a secret.

// Tag limits.
const (
	maxTags        = 3
	maxTagKeyLen   = 32
	maxTagValueLen = 64
)

// tagKeyOK: a key is lower-case letters, digits, '_', '-' and '.', and
// starts with a letter or a digit.
func tagKeyOK(k string) bool {
	if k == "" || len(k) > maxTagKeyLen || !alnum(k[0]) {
		return false
	}
	for i := range len(k) {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// tagValueOK: a value is letters, digits and _ - . : / @ +.
func tagValueOK(v string) bool {
	if v == "" || len(v) > maxTagValueLen {
		return false
	}
	for i := range len(v) {
		c := v[i]
		if !(alnum(c) || c >= 'A' && c <= 'Z' || strings.IndexByte("_-.:/@+", c) >= 0) {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

const tagRule = "a tag's key is 1 to 32 of a-z 0-9 _ - . (starting with a letter or digit), its value 1 to 64 of A-Z a-z 0-9 _ - . : / @ +"

// checkTags refuses more than maxTags tags, or one that breaks tagRule.
func checkTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return refuse(codeInvalidRequest, fmt.Sprintf("%d tags: a job carries at most %d", len(tags), maxTags))
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if !tagKeyOK(k) || !tagValueOK(tags[k]) {
			return refuse(codeInvalidRequest, fmt.Sprintf("tag %q: %s", k, tagRule))
		}
	}
	return nil
}

// parseTag reads a listing's tag filter, "key=value" ("" for none).
func parseTag(tag string) (key, value string, err error) {
	if tag == "" {
		return "", "", nil
	}
	k, v, ok := strings.Cut(tag, "=")
	if !ok || !tagKeyOK(k) || !tagValueOK(v) {
		return "", "", refuse(codeInvalidRequest, fmt.Sprintf("tag filter %q: want key=value; %s", tag, tagRule))
	}
	return k, v, nil
}

// tagsRequest is the tags' part of the request hash: none for a job
// without tags, so such a job's hash is as it was before tags.
func tagsRequest(tags map[string]string) []byte {
	if len(tags) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("tags")
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		b.WriteString("\x00" + k + "=" + tags[k])
	}
	return []byte(b.String())
}

// hasTag reports whether tags hold tag ("key=value").
func hasTag(tags map[string]string, tag string) bool {
	k, v, ok := strings.Cut(tag, "=")
	got, has := tags[k]
	return ok && has && got == v
}
