package ids_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/ids"
)

func TestTime(t *testing.T) {
	at := time.Date(2026, 12, 1, 13, 15, 0, 123e6, time.UTC)
	got, ok := ids.Time(ids.NewAt(ids.Delivery, at))
	require.True(t, ok)
	require.True(t, at.Equal(got), got)
	for _, bad := range []string{"", "dlv_", "dlv_short", "nounderscore01234567890123456", "dlv_" + "!!!!!!!!!!0123456789ABCDEF"} {
		_, ok := ids.Time(bad)
		require.False(t, ok, bad)
	}
}
