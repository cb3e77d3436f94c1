package main

// ownPhase is a phase that starts what it measures itself (servers, a
// cluster), rather than sharing the single-server phases' server. Each
// one records its figures into res under the keys its metrics name.
type ownPhase struct {
	name    string
	run     func(cfg config, bin, modelURL string, res result) error
	metrics func(cfg config) []metric
}

// ownPhases run after the single-server phases, in this order.
var ownPhases = []ownPhase{
	historyPhase,
	{name: "cluster", run: runCluster, metrics: clusterMetrics},
	{name: "streams", run: runStreams, metrics: streamsMetrics},
	idlePhase,
	transportsPhase,
	checkpointPhase,
}

// phaseNames lists every phase -phase accepts.
func phaseNames() []string {
	names := []string{"accept", "delivery", "cancel", "memory"}
	for _, ph := range ownPhases {
		names = append(names, ph.name)
	}
	return names
}
