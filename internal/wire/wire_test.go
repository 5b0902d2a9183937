package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		rest []byte
		ok   bool
	}{
		{"none", []byte{0, 7, 8}, []byte{7, 8}, true},
		{"two", []byte{2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 9}, []byte{9}, true},
		{"empty", nil, nil, false},
		{"truncated value", []byte{1, 0, 3, 0xaa}, nil, false},
		{"truncated varint", []byte{1, 0x80}, nil, false},
		{"huge size", []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rest, ok := SkipTags(tc.in)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.rest, rest)
			}
		})
	}
}
