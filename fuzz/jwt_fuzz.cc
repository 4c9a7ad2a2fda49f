// JWT verification (kube/jwt.h): the sidecar's check of the operator's and other sidecars'
// projected service-account tokens.
//
// The input picks a mode:
//   0 signed:  a header and a claims text (split at the first newline), base64url-encoded and
//              signed with one of the harness's two keys (RS256 "k-rsa", ES256 "k-ec"), then
//              optionally one byte of the token changed. Checks: the verifier accepts exactly
//              the tokens a reference reading of the rules accepts (alg of the signing key, kid
//              absent or the signer's, no crit, iss, aud containing "kshard", exp present and not
//              past, nbf not in the future, both with 60 s leeway, at most 16 KiB), and a
//              changed token is never accepted;
//   1 raw:     the rest as a token. Nothing made up can carry a signature of the harness's keys,
//              so it is never accepted, and refusals are Unauthenticated or NotFound;
//   2 jwks:    the rest as a key set. Parsing never throws; usable plus skipped keys equal the
//              array's length; a token of the harness's key verifies against a parsed set only
//              if the set holds that key's kid.
// Accepted claims are UTF-8 (they go into logs and error messages).
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/base64.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "kube/jwt.h"
#include "kube/jwt_signer.h"

namespace kshard::fuzz {
namespace {

using nlohmann::json;

constexpr std::int64_t kNow = 1'800'000'000;
const std::string kIssuer = "https://kubernetes.default.svc.cluster.local";

struct Keys {
  kube::JwtSigner rsa = kube::JwtSigner::generate("RS256", "k-rsa");
  kube::JwtSigner ec = kube::JwtSigner::generate("ES256", "k-ec");
  kube::JwkSet set;
  Keys() {
    json both = {{"keys", {rsa.publicJwk(), ec.publicJwk()}}};
    set = std::move(*kube::JwkSet::parse(both.dump()));
  }
};

const Keys& keys() {
  static const Keys k;
  return k;
}

kube::JwtExpectations expectations() {
  return {.issuer = kIssuer, .audience = "kshard", .now = kNow, .leewaySeconds = 60};
}

// A NumericDate as the rules read it: integers as they are (clamped to int64), fractions
// truncated, anything else (or out of range) missing.
std::optional<long double> referenceDate(const json& claims, const char* name) {
  if (!claims.contains(name)) return std::nullopt;
  const json& v = claims[name];
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<std::uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<std::int64_t>());
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= -9.2e18 && d <= 9.2e18)) return std::nullopt;
    return std::trunc(static_cast<long double>(d));
  }
  return std::nullopt;
}

bool referenceAccepts(const std::string& token, const std::string& headerText,
                      const std::string& claimsText, const kube::JwtSigner& signer) {
  if (token.size() > kube::kMaxJwtBytes) return false;
  const json header = json::parse(headerText, nullptr, false);
  const json claims = json::parse(claimsText, nullptr, false);
  if (!header.is_object() || !claims.is_object()) return false;
  if (!header.contains("alg") || header["alg"] != signer.alg()) return false;
  if (header.contains("crit")) return false;
  if (header.contains("kid") && header["kid"].is_string() && header["kid"] != "" &&
      header["kid"] != signer.kid()) {
    return false;
  }
  if (!claims.contains("iss") || claims["iss"] != kIssuer) return false;
  bool audience = false;
  if (claims.contains("aud")) {
    const json& aud = claims["aud"];
    audience = aud == "kshard";
    if (aud.is_array()) {
      for (const auto& a : aud) audience = audience || a == "kshard";
    }
  }
  if (!audience) return false;
  const auto exp = referenceDate(claims, "exp");
  if (!exp || *exp < kNow - 60) return false;
  if (claims.contains("nbf")) {
    const auto nbf = referenceDate(claims, "nbf");
    if (!nbf || *nbf > kNow + 60) return false;
  }
  return true;
}

void checkClaims(const kube::JwtClaims& c, std::string_view token) {
  for (const std::string* s : {&c.issuer, &c.subject, &c.keyId, &c.namespace_, &c.serviceAccount,
                               &c.podName, &c.podUid}) {
    check(referenceIsUtf8(*s), "accepted claims are UTF-8", token);
  }
  for (const auto& a : c.audiences) check(referenceIsUtf8(a), "audiences are UTF-8", token);
}

void signedMode(FuzzInput& in) {
  const kube::JwtSigner& signer = in.flag() ? keys().rsa : keys().ec;
  const bool mutate = in.flag();
  const auto at = static_cast<std::size_t>(in.inRange(0, 4095));
  const auto flip = static_cast<char>(in.byte() | 1);  // never 0: the byte always changes
  const std::string headerText(in.until('\n'));
  const std::string claimsText(in.rest());
  std::string token =
      signer.signParts(base64UrlEncode(headerText), base64UrlEncode(claimsText));
  const bool expected = referenceAccepts(token, headerText, claimsText, signer);
  if (mutate) token[at % token.size()] ^= flip;
  auto got = kube::verifyJwt(token, keys().set, expectations());
  if (mutate) {
    check(!got.ok(), "a changed token is never accepted", token);
    return;
  }
  if (got.ok()) checkClaims(*got, token);
  check(got.ok() == expected,
        expected ? "a token the rules accept is accepted" : "a token the rules refuse is refused",
        headerText + "\n" + claimsText + (got.ok() ? "" : "\n" + got.status().message()));
}

void rawMode(FuzzInput& in) {
  const std::string_view token = in.rest();
  auto got = kube::verifyJwt(token, keys().set, expectations());
  check(!got.ok(), "made-up bytes never verify", token);
  check(got.status().code() == StatusCode::kUnauthenticated ||
            got.status().code() == StatusCode::kNotFound,
        "refusals are Unauthenticated or NotFound", token);
}

void jwksMode(FuzzInput& in) {
  const std::string text(in.rest());
  auto set = kube::JwkSet::parse(text);
  const json j = json::parse(text, nullptr, false);
  if (!set.ok()) return;
  check(j.is_object() && j.contains("keys") && j["keys"].is_array(), "a set has a keys array",
        text);
  check(set->size() + set->skipped() == j["keys"].size(), "every key is used or skipped", text);
  check(set->size() > 0, "an accepted set has a usable key", text);
  bool holdsKid = false;
  for (const auto& id : set->keyIds()) holdsKid = holdsKid || id == "k-ec";
  const std::string token = keys().ec.sign(kube::serviceAccountClaims(
      kIssuer, "kshard", "demo", "counter", "counter-0", "u", kNow, kNow + 60));
  auto got = kube::verifyJwt(token, *set, expectations());
  if (got.ok()) check(holdsKid, "a token verifies only against a set with its key id", text);
}

}  // namespace

int fuzzOneJwt(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  switch (in.byte() % 3) {
    case 0:
      signedMode(in);
      break;
    case 1:
      rawMode(in);
      break;
    default:
      jwksMode(in);
  }
  return 0;
}

}  // namespace kshard::fuzz
