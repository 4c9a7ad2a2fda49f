#include "fuzz/fuzz_targets.h"

#include <algorithm>
#include <array>

namespace kshard::fuzz {
namespace {

// One line per harness. A new harness is its fuzz/<name>_fuzz.cc, a line here, its name in
// fuzz/targets.cmake and a seed corpus in fuzz/corpus/<name>/.
constexpr std::array kTargets = {
    FuzzTarget{"admission_review", fuzzOneAdmissionReview,
               "AdmissionReview bodies to the sidecar injector; patches apply and are idempotent"},
    FuzzTarget{"base64", fuzzOneBase64, "base64 and base64url; round trips, canonical input only"},
    FuzzTarget{"channel_frame", fuzzOneChannelFrame,
               "kshard channel frames from another sidecar; accepted ones are well-formed and "
               "round-trip"},
    FuzzTarget{"duration", fuzzOneDuration, "Kubernetes durations; parse/format round trips"},
    FuzzTarget{"entity_key", fuzzOneEntityKey,
               "entity type/id, shard of an id, UTF-8, pass-through headers; against references"},
    FuzzTarget{"http_head", fuzzOneHttpHead,
               "HTTP message heads and bodies on the data path; against Beast's parser"},
    FuzzTarget{"injection_config", fuzzOneInjectionConfig,
               "the injector's YAML config; accepted configs inject a plain pod"},
    FuzzTarget{"jwt", fuzzOneJwt,
               "service-account JWTs and key sets; accepted exactly when the rules say so"},
    FuzzTarget{"json_depth", fuzzOneJsonDepth,
               "the JSON depth check before parsing; sound against nlohmann, exact on JSON"},
    FuzzTarget{"kube_api", fuzzOneKubeApi, "API server error bodies and RFC 3339 times"},
    FuzzTarget{"kubeconfig", fuzzOneKubeconfig, "kubeconfig YAML; accepted configs are coherent"},
    FuzzTarget{"options_yaml", fuzzOneOptionsYaml,
               "the sidecar's --config YAML; ranges hold, a valid config can register"},
    FuzzTarget{"router", fuzzOneRouter,
               "request targets through the HTTP router; against a reference router"},
    FuzzTarget{"shard_map_json", fuzzOneShardMapJson,
               "ShardMap JSON and its owner table; round trips, one owner per shard"},
    FuzzTarget{"shard_set", fuzzOneShardSet,
               "the shard range codec; against a reference grammar, round trips"},
    FuzzTarget{"version", fuzzOneVersion, "version labels; the order is strict and total"},
    FuzzTarget{"watch_stream", fuzzOneWatchStream,
               "watch stream framing cut at any points; same events as uncut"},
    FuzzTarget{"wire", fuzzOneWire, "manager and peer API bodies; field limits, round trips"},
};

}  // namespace

std::span<const FuzzTarget> fuzzTargets() { return kTargets; }

const FuzzTarget* findFuzzTarget(std::string_view name) {
  const auto it = std::find_if(kTargets.begin(), kTargets.end(),
                               [name](const FuzzTarget& t) { return t.name == name; });
  return it == kTargets.end() ? nullptr : &*it;
}

}  // namespace kshard::fuzz
