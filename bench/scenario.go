package main

import "context"

// scenario is one comparison. Each run sets up its own fresh databases
// (one per system and variant) so that scenarios do not disturb each other,
// and returns its measurements. A new scenario is one more entry here.
type scenario struct {
	name  string
	about string
	run   func(ctx context.Context, b *bench) ([]measurement, error)
}

// scenarios are run in this order.
var scenarios = []scenario{
	{name: "cycle", about: "start → fetch → complete, one start per request or transaction; occurrences (jobs) per second", run: runCycle},
	{name: "cycle-batch", about: "start → fetch → settle with batch starts (POST .../instances/batch; River InsertMany) and batch settlements (POST /pull/settle)", run: runCycleBatch},
	{name: "latency", about: "idle pickup latency: start committed → worker receives it, one start at a time", run: runLatency},
	{name: "backlog", about: "cost of fetching one occurrence (job) with 1,000 vs many other rows in the table", run: runBacklog},
	{name: "push", about: "Relais push throughput to a local HTTP destination (River has no equivalent)", run: runPush},
}

func scenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return names
}

// Systems and variants measured.
const (
	sysRelais       = "relais"
	sysRiverTuned   = "river-tuned"
	sysRiverDefault = "river-default"
)

// measurement is one figure of one system in one scenario.
type measurement struct {
	Scenario string  `json:"scenario"`
	System   string  `json:"system"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	// Runs are the figures of each round when Value is their median.
	Runs []float64 `json:"runs,omitempty"`
	Unit string    `json:"unit"`
	// Better is "higher" or "lower".
	Better string `json:"better"`
	// Compare is false for figures that are not comparable across systems
	// (measured at different layers); the table shows no ratio for them.
	Compare bool `json:"-"`
}
