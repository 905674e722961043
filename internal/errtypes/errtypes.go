// Package errtypes names an error without its text: the Go types along its
// chain. Error text may quote a URL, a token or a response body, so logs
// carry this instead.
package errtypes

import (
	"fmt"
	"strings"
)

// Of lists the Go types along err's chain, e.g.
// "*fmt.wrapError>*url.Error>*net.OpError": enough to find the failing call
// in a log line without the error's text, which may quote secrets.
func Of(err error) string {
	var types []string
	var walk func(error)
	walk = func(e error) {
		for e != nil && len(types) < 12 {
			types = append(types, fmt.Sprintf("%T", e))
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					walk(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	walk(err)
	return strings.Join(types, ">")
}
