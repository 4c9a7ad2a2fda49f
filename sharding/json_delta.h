// JSON deltas: the edits that turn one JSON document into another, so that a reader holding the
// first receives only what changed (the ShardMap's assignments between two versions: an edit of
// a few pods and assignments instead of the whole status; docs/architecture.md, "How sidecars
// learn the map").
//
// A delta is an array of changes, applied in order:
//
//   {"p": ["status", "epoch"], "v": 42}        set a member (added or replaced)
//   {"p": ["status", "load"], "d": true}       delete a member
//   {"p": ["status", "pods"], "e": [ops...]}   edit an array element by element
//   {"p": ["status", "unassigned"], "t": [ops...]}   edit text as its comma-separated tokens
//                                              (long lists in text: the status's shard sets)
//
// `p` is the path of object members from the root. An array edit walks a cursor over the old
// array and builds the new one from ops:
//
//   n (> 0)              copy the next n old elements
//   -n                   skip the next n old elements
//   [e1, e2, ...]        insert these new elements
//   {"m": {...}, "x": [keys]}   the next old element (an object) with these members replaced
//                        and these keys removed
//
// Old elements after the last op are dropped. Pure; the result of applyJsonDelta(a, diffJson(a,
// b)) is b for any two objects a and b (tests/sharding/json_delta_test.cc checks it on random
// documents), and a delta that does not fit the document it is applied to is refused, not
// guessed at. Readers check a digest of the result (textDigest) besides, since a delta applied
// to the wrong base can fit it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kshard::sharding {

// The changes that turn `from` into `to`; both must be objects.
nlohmann::json diffJson(const nlohmann::json& from, const nlohmann::json& to);

// `from` with `changes` applied; InvalidArgument naming the change that does not fit.
StatusOr<nlohmann::json> applyJsonDelta(const nlohmann::json& from, const nlohmann::json& changes);

// FNV-1a (64 bits) of `text`, as 16 lowercase hex digits: a check that two copies of a document
// agree, not a defence against a forger (the channel that carries it is authenticated).
std::string textDigest(std::string_view text);

}  // namespace kshard::sharding
