// Package kshard is the Go SDK of kshard's app contract (sdk/README.md).
//
// An app serves its sidecar's callbacks with a [Server]: one [Handler] per entity type, called
// one message at a time per entity, with late messages (Kshard-Turn) and callbacks of a stale
// sidecar process (Kshard-Incarnation) refused, and the reset callback stopping every entity.
// A Handler that is a [Starter] is told of starts without a message; [Server.HandleSingleton]
// runs the map's singletons; [Reply].Passivate asks the sidecar to stop an entity after a turn.
// It sends to entities with a [Client]: Ask (request and reply) and Tell (fire and forget),
// whose sidecar errors are typed ([SidecarError], matched with errors.Is against ErrSendTimeout,
// ErrOutcomeUnknown, ...).
package kshard
