package partitions

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// schema is what the model needs of a table's definition: its key and its
// global secondary indexes.
type schema struct {
	table             string
	hashKey, rangeKey string
	indexes           []index
	indexByName       map[string]*index
	keyAttrs          []string // the table's key attributes
}

// index is a global secondary index.
type index struct {
	name              string
	hashKey, rangeKey string
	projection        types.ProjectionType
	nonKey            map[string]bool // INCLUDE's attributes
}

func schemaOf(in *dynamodb.CreateTableInput) (*schema, error) {
	if in == nil || aws.ToString(in.TableName) == "" {
		return nil, errors.New("partitions: Config.Table must name a table")
	}
	s := &schema{table: aws.ToString(in.TableName), indexByName: map[string]*index{}}
	s.hashKey, s.rangeKey = keysOf(in.KeySchema)
	if s.hashKey == "" {
		return nil, fmt.Errorf("partitions: table %s has no partition key", s.table)
	}
	s.keyAttrs = []string{s.hashKey}
	if s.rangeKey != "" {
		s.keyAttrs = append(s.keyAttrs, s.rangeKey)
	}
	for _, g := range in.GlobalSecondaryIndexes {
		ix := index{name: aws.ToString(g.IndexName), projection: types.ProjectionTypeAll, nonKey: map[string]bool{}}
		ix.hashKey, ix.rangeKey = keysOf(g.KeySchema)
		if ix.hashKey == "" {
			return nil, fmt.Errorf("partitions: index %s has no partition key", ix.name)
		}
		if g.Projection != nil && g.Projection.ProjectionType != "" {
			ix.projection = g.Projection.ProjectionType
			for _, a := range g.Projection.NonKeyAttributes {
				ix.nonKey[a] = true
			}
		}
		s.indexes = append(s.indexes, ix)
	}
	for i := range s.indexes {
		s.indexByName[s.indexes[i].name] = &s.indexes[i]
	}
	return s, nil
}

func keysOf(ks []types.KeySchemaElement) (hash, rng string) {
	for _, k := range ks {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	return hash, rng
}

// itemKey names an item: its partition key value, and its sort key value
// when the table has one.
func (s *schema) itemKey(key item) (string, string, error) {
	h, ok := key[s.hashKey].keyString()
	if !ok {
		return "", "", fmt.Errorf("%w: item without its key %s", ErrUnsupported, s.hashKey)
	}
	if s.rangeKey == "" {
		return h, h, nil
	}
	r, ok := key[s.rangeKey].keyString()
	if !ok {
		return "", "", fmt.Errorf("%w: item without its key %s", ErrUnsupported, s.rangeKey)
	}
	return h + "\x00" + r, h, nil
}

// keyOf returns the key attributes of an item.
func (s *schema) keyOf(it item) item {
	k := item{}
	for _, a := range s.keyAttrs {
		if v, ok := it[a]; ok {
			k[a] = v
		}
	}
	return k
}

// entry returns the item's entry in the index: its partition key value,
// its sort key value, and the entry (index keys, table keys, projected
// attributes); ok is false when the item is not in the index (a sparse
// index: a key attribute missing or of a type a key cannot have).
func (ix *index) entry(s *schema, it item) (pk, sk string, e item, ok bool) {
	if it == nil {
		return "", "", nil, false
	}
	if pk, ok = it[ix.hashKey].keyString(); !ok {
		return "", "", nil, false
	}
	if ix.rangeKey != "" {
		if sk, ok = it[ix.rangeKey].keyString(); !ok {
			return "", "", nil, false
		}
	}
	switch ix.projection {
	case types.ProjectionTypeAll:
		return pk, sk, it, true
	}
	e = item{}
	for _, a := range append([]string{ix.hashKey, ix.rangeKey}, s.keyAttrs...) {
		if v, ok := it[a]; ok && a != "" {
			e[a] = v
		}
	}
	if ix.projection == types.ProjectionTypeInclude {
		for a := range ix.nonKey {
			if v, ok := it[a]; ok {
				e[a] = v
			}
		}
	}
	return pk, sk, e, true
}
