// Package ids makes hookrelay's object IDs: a type prefix (app_, ep_, evt_,
// dlv_, atm_, key_, whk_, crr_) and a 26-character sortable identifier (48-bit
// millisecond time, 80 random bits, Crockford base32), as in ULID.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// Prefixes of each object type.
const (
	App      = "app_"
	Endpoint = "ep_"
	Event    = "evt_"
	Delivery = "dlv_"
	Attempt  = "atm_"
	APIKey   = "key_"
	Secret   = "whk_"
	// Carrier names a workflow carrying many first attempts.
	Carrier = "crr_"
	// PortalLink names a portal link; PortalSession a session opened by one.
	PortalLink    = "pl_"
	PortalSession = "ps_"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// New returns prefix followed by a new sortable identifier.
func New(prefix string) string {
	return NewAt(prefix, time.Now())
}

// NewAt is New with an explicit time, for IDs that must sort by it.
func NewAt(prefix string, t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	// 128 bits → 26 base32 characters (the first carries 3 bits).
	var sb strings.Builder
	sb.Grow(len(prefix) + 26)
	sb.WriteString(prefix)
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	sb.Write(out)
	return sb.String()
}

// Time returns when an ID was made (millisecond precision): its first 10
// characters after the prefix, in both the Go and the SQL layout. It reports
// false for a string that is not such an ID.
func Time(id string) (time.Time, bool) {
	_, rest, ok := strings.Cut(id, "_")
	if !ok || len(rest) != 26 {
		return time.Time{}, false
	}
	var ms uint64
	for _, c := range rest[:10] {
		v := strings.IndexRune(alphabet, c)
		if v < 0 {
			return time.Time{}, false
		}
		ms = ms<<5 | uint64(v)
	}
	return time.UnixMilli(int64(ms)), true
}
