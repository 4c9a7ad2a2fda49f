// JWT verification for Kubernetes service-account tokens (RFC 7519, JWS compact form, RFC 7515).
//
// The keys are the cluster's service-account issuer keys, a JSON Web Key Set (RFC 7517) as the
// API server publishes it at /openid/v1/jwks. A token is accepted only when:
//   - it is three base64url parts, header and claims JSON objects, at most kMaxJwtBytes long;
//   - its `alg` is RS256, ES256 or ES384 (never `none`, never HMAC) and matches the type and
//     curve of the key it names with `kid` (and the key's own `alg` when the key has one), so a
//     public key cannot be used as a MAC secret or with another algorithm;
//   - the signature verifies with that key;
//   - `iss` equals the expected issuer, `aud` (a string or an array) contains the expected
//     audience, `exp` is present and not past, and `nbf` is not in the future (both with leeway).
//
//   auto keys = kube::JwkSet::parse(jwksJson);
//   auto claims = kube::verifyJwt(token, *keys, {.issuer = iss, .audience = "kshard", .now = t});
//   if (claims.ok()) use(claims->subject, claims->podName);
//
// Errors: Unauthenticated with the reason ("token expired at ..."), NotFound when the token
// names a key the set does not have (the caller may refresh the set: keys rotate).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kshard::kube {

inline constexpr std::size_t kMaxJwtBytes = 16 * 1024;

// What a verified service-account token says. The kubernetes.io fields are empty for tokens that
// do not carry them (not a service account's, or not bound to a pod).
struct JwtClaims {
  std::string issuer;
  std::string subject;  // "system:serviceaccount:<namespace>:<name>"
  std::vector<std::string> audiences;
  std::int64_t expiresAt = 0;  // seconds since the epoch
  std::int64_t notBefore = 0;  // 0: absent
  std::string keyId;           // the header's kid
  std::string namespace_;      // kubernetes.io.namespace
  std::string serviceAccount;  // kubernetes.io.serviceaccount.name
  std::string podName;         // kubernetes.io.pod.name
  std::string podUid;          // kubernetes.io.pod.uid
};

// One public key of a set. Opaque; owned by its JwkSet.
struct Jwk;

class JwkSet {
 public:
  JwkSet();
  ~JwkSet();
  JwkSet(JwkSet&&) noexcept;
  JwkSet& operator=(JwkSet&&) noexcept;

  // Parses {"keys": [...]}. Keys of other types (oct, OKP), other uses (enc) or malformed ones are
  // skipped and counted in skipped(); a set with no usable key is InvalidArgument.
  static StatusOr<JwkSet> parse(std::string_view json);

  std::size_t size() const { return keys_.size(); }
  std::size_t skipped() const { return skipped_; }
  // The key ids, for logs.
  std::vector<std::string> keyIds() const;

  const std::vector<std::unique_ptr<Jwk>>& keys() const { return keys_; }

 private:
  std::vector<std::unique_ptr<Jwk>> keys_;
  std::size_t skipped_ = 0;
};

struct JwtExpectations {
  std::string issuer;    // empty: any issuer
  std::string audience;  // required
  std::int64_t now = 0;  // seconds since the epoch
  std::int64_t leewaySeconds = 60;
};

[[nodiscard]] StatusOr<JwtClaims> verifyJwt(std::string_view token, const JwkSet& keys,
                                            const JwtExpectations& expect);

// "Bearer <token>" → the token; nothing for any other form.
std::string_view bearerToken(std::string_view authorizationHeader);

}  // namespace kshard::kube
