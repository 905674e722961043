package deploy_test

import (
	"slices"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// (An external test: dynamostore imports jobs, which imports deploy.)

// The indexes the grants name are the table's (dynamostore's one
// definition).
func TestGrantedIndexesAreTheTables(t *testing.T) {
	var indexes []string
	for _, g := range dynamostore.CreateTableInput("jobs").GlobalSecondaryIndexes {
		indexes = append(indexes, *g.IndexName)
	}
	for _, role := range deploy.Roles() {
		for _, g := range deploy.Grants(role) {
			if name, ok := g.Resource.IndexName(); ok && !slices.Contains(indexes, name) {
				t.Errorf("%s: index %q is not the table's (%v)", role, name, indexes)
			}
		}
	}
}
