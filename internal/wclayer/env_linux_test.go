package wclayer

import "testing"

// Under Linux the portable tests run the emulator's own importer (folders, trusted.* xattrs,
// whiteout device nodes), which needs root.
func layerTestEnv(tb testing.TB) *Layers {
	tb.Helper()
	requireRoot(tb)
	return New()
}

// layerDiff describes how layer differs from the tar in want, or "" when it holds exactly its
// entries: its export must give back every entry as the tar had it (names, types, modes,
// times, PAX records, link targets, content).
func layerDiff(t *testing.T, layer string, want []byte) string {
	t.Helper()
	return diffEntries(readEntries(t, want), readEntries(t, exportBytes(t, New(), layer)))
}
