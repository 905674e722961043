// Package keyring reads the payload-sealing key ring from configuration.
package keyring

import (
	"encoding/base64"
	"errors"
	"strings"
)

// Parse reads comma-separated base64 keys, as in JOBS_PAYLOAD_KEY.
func Parse(s string) ([][]byte, error) {
	var keys [][]byte
	for _, part := range strings.Split(s, ",") {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(part))
		if err != nil {
			return nil, errors.New("jobs: payload key is not valid base64")
		}
		keys = append(keys, k)
	}
	return keys, nil
}
