// Package disagg models the KV-cache transfer of disaggregated serving: how many bytes a handoff from a
// prefill worker to a decode worker carries, and how long it takes on links that concurrent transfers
// share.
//
// The reference (dynamo-mocker.md §8) charges each transfer tokens × bytes per token / bandwidth, alone on
// its link. Network goes further: every worker has one link, a transfer uses its source's and its
// destination's, and a link's bandwidth is split evenly among the transfers on it (processor sharing), as
// on a real NIC. A transfer alone on its links takes exactly the reference's time. Start with Network.
//
// Live workers also rendezvous over TCP, as Dynamo's do: a decode worker connects to its prefill worker's
// BootstrapServer with ConnectBootstrap and is released once the prefill worker has completed the request.
package disagg
