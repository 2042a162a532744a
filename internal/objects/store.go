package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Owner is who created an object through Corral.
type Owner struct {
	// Tenant is the owning tenant's id.
	Tenant string `json:"t"`
	// Upstream names the upstream that holds the object; follow-up
	// requests go there.
	Upstream string `json:"u"`
	// Kind is the object's kind ("file", "batch", "response", ...).
	Kind string `json:"k"`
	// Created is when Corral recorded it.
	Created time.Time `json:"c"`
	// Entry is the cache entry that carries the object's id (a stored
	// response answered from the cache), purged when the object is
	// deleted; "" for none.
	Entry string `json:"e,omitempty"`
}

// Store keeps ownership records. Records never expire: an object lives
// until its owner deletes it through Corral (or an operator removes it).
type Store interface {
	// Claim records o for id unless id already has an owner, and returns
	// the owner on record afterwards (o, or the earlier one).
	Claim(ctx context.Context, id string, o Owner) (Owner, error)
	// Get returns the owners of ids in order; nil where there is none.
	Get(ctx context.Context, ids []string) ([]*Owner, error)
	// Set records o for id, replacing any owner (an operator's assignment).
	Set(ctx context.Context, id string, o Owner) error
	// Delete removes id's record; a missing record is not an error.
	Delete(ctx context.Context, id string) error
}

// ErrFull is returned by the memory store when it holds its maximum.
var ErrFull = errors.New("objects: memory store is full")

// MaxIDLen bounds an object id Corral looks up or records; longer ids
// are nobody's. Upstream ids are a few dozen characters.
const MaxIDLen = 256

func encodeOwner(o Owner) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("objects: encode: %w", err)
	}
	return b, nil
}

func decodeOwner(b []byte) (*Owner, error) {
	var o Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("objects: decode record: %w", err)
	}
	return &o, nil
}
