// Package cluster tests the dev relay as several nodes routing through NATS
// (demo/relay/natstable), with a real NATS server embedded in the test
// process, the real dev runtime, and the real client engine (wasm/client,
// natively): browsers and runtimes reach the nodes through TCP hops the
// tests re-point, as a load balancer would send a redial to another node.
package cluster
