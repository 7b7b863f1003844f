package userspace

import "github.com/proxybench/proxybench/proxymodes/userspace/balance"

// The endpoint choice lives in package balance (pure, shared with the sim
// engine); these names keep the mode's API.
type (
	// Balancer is balance.Balancer.
	Balancer = balance.Balancer
	// Affinity is balance.Affinity.
	Affinity = balance.Affinity
)

// DefaultAffinityTimeout is balance.DefaultAffinityTimeout.
const DefaultAffinityTimeout = balance.DefaultAffinityTimeout

// ErrNoEndpoints is balance.ErrNoEndpoints.
var ErrNoEndpoints = balance.ErrNoEndpoints

// NewBalancer is balance.NewBalancer.
var NewBalancer = balance.NewBalancer
