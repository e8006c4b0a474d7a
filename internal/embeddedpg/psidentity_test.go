package embeddedpg

import "testing"

// TestPSIdentity: where there is no /proc, a leftover postmaster is told
// by its command line: ours only with exactly -D and the data directory
// (spaces in it included), unknown for another postgres (its pid file is
// then kept), not ours for another program.
func TestPSIdentity(t *testing.T) {
	t.Parallel()
	dir := "/Users/ann/Library/Application Support/relais/pg/data"
	for cmd, want := range map[string]identity{
		"/opt/pg/bin/postgres -D " + dir + " -p 5433\n": isOurs,
		"/opt/pg/bin/postgres -D " + dir:                isOurs,
		"/opt/pg/bin/postgres -D " + dir + "2 -p 5433":  unknown,
		"/opt/pg/bin/postgres -D /elsewhere -p 5433":    unknown,
		"/usr/bin/vim " + dir:                           notOurs,
	} {
		if got := psIdentity(cmd, dir); got != want {
			t.Errorf("psIdentity(%q) = %v, want %v", cmd, got, want)
		}
	}
}
