package filter

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheEvictsTheLeastRecentlyUsedOne: a full cache drops one program,
// the least recently used, for a new one: a saved filter in use survives
// any number of others tried once.
func TestCacheEvictsTheLeastRecentlyUsedOne(t *testing.T) {
	f, err := New()
	require.NoError(t, err)
	saved, err := f.Program("data.amount > 100")
	require.NoError(t, err)
	for i := range CacheSize + 50 {
		_, err := f.Program(fmt.Sprintf("data.amount > %d", 1000+i))
		require.NoError(t, err)
		again, err := f.Program("data.amount > 100") // in use on every event
		require.NoError(t, err)
		require.Same(t, saved, again, "the saved filter's program stays cached (%d others tried)", i+1)
	}
	require.Equal(t, CacheSize, f.cachedPrograms())
}
