// Package embeddedpg runs a private PostgreSQL cluster from the server
// binaries already installed on the machine, so that relais works without
// a database URL and each test package can get its own throwaway server.
//
// A cluster lives in one folder (Options.Dir, mode 0700): the data
// directory in Dir/data, Unix sockets in Dir/run, server output in
// Dir/postgres.log, the superuser's password in Dir/password. The first
// Start creates it with initdb; later Starts reuse it.
//
// The server listens on 127.0.0.1 only, where any local user can reach
// it, so TCP needs the postgres role's password (scram-sha-256), which
// Cluster.URL and RunningURL carry: never log those URLs whole. The Unix
// socket is trusted: only the cluster user and root can enter Dir, and
// they can read the data files anyway. Start owns pg_hba.conf and rewrites
// it at every start. A cluster created with trust by an earlier version
// gets a password over the socket at its next Start; when Dir's path is
// too long for a socket, it keeps trusting TCP and Start logs a warning
// (move it to a shorter path).
//
// PostgreSQL refuses to run as root. When relais runs as root, the server
// and initdb run as the postgres user (or nobody), which must be able to
// traverse every parent folder of Dir; Start reports a clear error
// instead of loosening permissions of folders it did not create.
//
// The server runs in its own process group so that a Ctrl-C on the
// terminal reaches relais only, and relais decides when to stop it. If
// relais dies without calling Stop, the kernel sends the server SIGINT
// (fast shutdown) through the parent-death signal, and the next Start
// stops any server that is still left over before starting afresh.
//
// The package is Linux-only: it relies on /proc and on parent-death
// signals.
package embeddedpg
