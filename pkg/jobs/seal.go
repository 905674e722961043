package jobs

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// Secret payload fields.
//
// A payload field tagged `jobs:"secret"` never reaches storage in the
// clear: enqueue seals its value with the service's [Sealer] (AES-256-GCM,
// bound to the job id and the field name) and the worker opens it just
// before decoding the payload for the handler. A DynamoDB export, a console
// read or a backup then shows {"$sealed": "..."} in its place. The API never
// returns payloads, and no log line carries one.
//
//	type ChargePayload struct {
//		Customer string `json:"customer"`
//		CardToken string `json:"card_token" jobs:"secret"`
//	}
//
// Only top-level, exported, encoded fields of a struct payload can be
// secret; Register refuses a payload type that tags any other field
// (nested, embedded, unexported, json:"-", or under a json name encoding/json
// refuses) with errSecretTag, rather than let it reach the table in plain
// text. A Sealer of your own must also key request hashes (HashKeyer).

// Sealer encrypts and decrypts secret payload fields. aad binds a sealed
// value to its job and field.
type Sealer interface {
	Seal(plaintext, aad []byte) (string, error)
	Open(sealed string, aad []byte) ([]byte, error)
}

// errNoSealer  a kind has secret payload fields but no Sealer is configured.
var errNoSealer = errors.New("jobs: a kind has secret payload fields but no Sealer is configured (set the payload key of docs/reference/CONFIGURATION.md)")

// AESSealer seals with AES-256-GCM. It seals with its first key and opens
// with any of its keys, so keys can be rotated: put the new key first and
// keep the old ones until the jobs sealed with them have expired.
type AESSealer struct {
	seal keyEntry
	byID map[string]cipher.AEAD
	// hash keys request hashes: one derived key per key of the ring, by
	// key id, and the id of the one new hashes use (the last, oldest key).
	hash hashKeys
}

type keyEntry struct {
	id   string
	aead cipher.AEAD
}

// NewAESSealer returns a sealer over one or more 32-byte keys.
func NewAESSealer(keys ...[]byte) (*AESSealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("jobs: NewAESSealer needs a key")
	}
	s := &AESSealer{byID: map[string]cipher.AEAD{}, hash: hashKeys{byID: map[string][]byte{}}}
	for i, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("jobs: payload key %d is %d bytes, want 32", i+1, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(k)
		id := hex.EncodeToString(sum[:4])
		s.byID[id] = aead
		if i == 0 {
			s.seal = keyEntry{id: id, aead: aead}
		}
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte("lambdajobs request hash"))
		s.hash.byID[id] = mac.Sum(nil)
		s.hash.current = id // the last key: the oldest, the last to go
	}
	return s, nil
}

// Seal encrypts plaintext: "v1.<key id>.<base64(nonce|ciphertext)>".
func (s *AESSealer) Seal(plaintext, aad []byte) (string, error) {
	nonce := make([]byte, s.seal.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := s.seal.aead.Seal(nonce, nonce, plaintext, aad)
	return "v1." + s.seal.id + "." + base64.RawStdEncoding.EncodeToString(out), nil
}

// errUnseal  a sealed value cannot be opened (unknown key, tampered, or
// moved to another job or field).
var errUnseal = errors.New("jobs: sealed value cannot be opened")

// errUnknownKey: a sealed value names a key this sealer does not hold (a
// key rotation that has not reached this instance yet, or a key that left
// the ring).
var errUnknownKey = fmt.Errorf("%w: its key is not in this instance's ring", errUnseal)

// Open decrypts a value made by Seal.
func (s *AESSealer) Open(sealed string, aad []byte) ([]byte, error) {
	parts := strings.SplitN(sealed, ".", 3)
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, errUnseal
	}
	aead, ok := s.byID[parts[1]]
	if !ok {
		return nil, errUnknownKey
	}
	raw, err := base64.RawStdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) < aead.NonceSize() {
		return nil, errUnseal
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], aad)
	if err != nil {
		return nil, errUnseal
	}
	return plain, nil
}

// hashKeys key the request hash, so the stored hash of a payload with
// secrets cannot be used to guess them.
func (s *AESSealer) hashKeys() hashKeys { return s.hash }

// errSecretTag  a payload type tags a field jobs:"secret" where it cannot
// be sealed (see Register).
var errSecretTag = errors.New(`jobs: a jobs:"secret" tag that cannot be sealed`)

// secretFields returns the JSON names of P's top-level fields tagged
// `jobs:"secret"`, or errSecretTag for a tag that sealing would silently
// miss: on a field of a nested or embedded struct, on an unexported field,
// on a field encoding/json skips ("-"), or under a json name encoding/json
// refuses (it would encode the field under its Go name instead).
func secretFields[P any]() ([]string, error) {
	t := reflect.TypeFor[P]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		if path := nestedSecret(t, map[reflect.Type]bool{}); path != "" {
			return nil, fmt.Errorf("%w: %s: only top-level fields of a struct payload can be secret", errSecretTag, path)
		}
		return nil, nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		secret := f.Tag.Get("jobs") == "secret"
		if path := nestedSecret(f.Type, map[reflect.Type]bool{t: true}); path != "" {
			return nil, fmt.Errorf("%w: %s.%s: only top-level fields of a struct payload can be secret", errSecretTag, f.Name, path)
		}
		if !secret {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous:
			return nil, fmt.Errorf("%w: embedded field %s: tag its own fields at the top level instead", errSecretTag, f.Name)
		case !f.IsExported():
			return nil, fmt.Errorf("%w: unexported field %s is never encoded", errSecretTag, f.Name)
		case name == "-" && f.Tag.Get("json") == "-":
			return nil, fmt.Errorf("%w: field %s is never encoded (json:\"-\")", errSecretTag, f.Name)
		case name != "" && !validJSONName(name):
			return nil, fmt.Errorf("%w: field %s: encoding/json refuses the name %q and would use %q", errSecretTag, f.Name, name, f.Name)
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names, nil
}

// nestedSecret finds a jobs:"secret" tag anywhere inside t (a field's type),
// and returns its path.
func nestedSecret(t reflect.Type, seen map[reflect.Type]bool) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return ""
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("jobs") == "secret" {
			return f.Name
		}
		if path := nestedSecret(f.Type, seen); path != "" {
			return f.Name + "." + path
		}
	}
	return ""
}

// validJSONName is encoding/json's rule for a tag name.
func validJSONName(s string) bool {
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return s != ""
}

const sealedKey = "$sealed"

// sealPayload replaces the secret fields of payload (a JSON object) with
// {"$sealed": ...}. encoding/json matches keys without regard to case, so
// the fields are matched the same way.
func sealPayload(s Sealer, id string, fields []string, payload []byte) ([]byte, error) {
	return rewriteFields(payload, fields, func(key string, v json.RawMessage) (json.RawMessage, error) {
		sealed, err := s.Seal(v, aad(id, key))
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{sealedKey: sealed})
	})
}

// openPayload undoes sealPayload.
func openPayload(s Sealer, id string, fields []string, payload []byte) ([]byte, error) {
	return rewriteFields(payload, fields, func(key string, v json.RawMessage) (json.RawMessage, error) {
		var box map[string]string
		if json.Unmarshal(v, &box) != nil || len(box) != 1 || box[sealedKey] == "" {
			return nil, errUnseal
		}
		if s == nil {
			return nil, errNoSealer
		}
		return s.Open(box[sealedKey], aad(id, key))
	})
}

func aad(id, key string) []byte {
	return []byte("lambdajobs/v1\x00" + id + "\x00" + strings.ToLower(key))
}

func rewriteFields(payload []byte, fields []string, f func(string, json.RawMessage) (json.RawMessage, error)) ([]byte, error) {
	if len(fields) == 0 {
		return payload, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return nil, payloadErr("expected an object")
	}
	changed := false
	for key, v := range obj {
		for _, name := range fields {
			if strings.EqualFold(key, name) {
				nv, err := f(key, v)
				if err != nil {
					return nil, err
				}
				obj[key] = nv
				changed = true
			}
		}
	}
	if !changed {
		return payload, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
