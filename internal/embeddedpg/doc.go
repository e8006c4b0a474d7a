// Package embeddedpg runs a private PostgreSQL cluster from the server
// binaries already installed on the machine, so that relais works without
// a database URL and each test package can get its own throwaway server.
//
// A cluster lives in one folder (Options.Dir): the data directory in
// Dir/data, Unix sockets in Dir/run, server output in Dir/postgres.log. The
// first Start creates it with initdb; later Starts reuse it. The server
// listens on 127.0.0.1 only and trusts every local connection, so it must
// not be exposed beyond the machine.
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
