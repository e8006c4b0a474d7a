// Package faultsuite is Relais's fault-injection suite (issue #16), a test
// only: it builds the relais binary, runs two `relais serve` replicas as
// child processes on one PostgreSQL (the embedded cluster of the first
// replica, which supervises it; the second connects to it by URL), feeds
// them thousands of occurrences worked by Go SDK workers and a push
// destination, and injects one fault per scenario at a point it controls:
//
//   - none (the control);
//   - kill -9 of the second replica, restarted on its port;
//   - PostgreSQL fast shutdown (pg_ctl stop -m fast), restarted by the
//     first replica's supervisor;
//   - PostgreSQL immediate shutdown (pg_ctl stop -m immediate: crash
//     recovery at the restart);
//   - kill -9 of the postmaster, restarted by the supervisor;
//   - kill -9 of a worker process holding tasks mid-handler;
//   - a push destination that hangs past the node's timeout for some
//     calls.
//
// After each scenario it checks that every instance ended as the scenario
// predicts, that every occurrence was settled exactly once (one completed
// attempt at most, no attempt left open, no completion acknowledged to
// two workers or lost after it was acknowledged, no destination called
// twice), that no lock outlived its expiry by more than the timers allow,
// and that both replicas' relais_occurrences gauge agrees with a count of
// the database once their counts were refreshed. It logs a summary table
// (go test -v -run TestFaults ./internal/faultsuite/).
package faultsuite
