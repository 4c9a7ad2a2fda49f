// JwtSigner: makes signed JWTs and the matching key set, for tests and fuzz harnesses (kshard never
// signs tokens in production: the API server does). A fresh key per signer.
//
//   auto signer = kube::JwtSigner::generate("ES256", "key-1");
//   std::string jwks = signer.jwks();               // {"keys":[{...public key...}]}
//   std::string token = signer.sign(claimsJson);     // header {"alg":"ES256","kid":"key-1"}
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace kshard::kube {

class JwtSigner {
 public:
  // alg: RS256 (2048-bit key), ES256 or ES384. Aborts on an unknown alg or an OpenSSL failure.
  static JwtSigner generate(const std::string& alg, std::string kid);
  ~JwtSigner();
  JwtSigner(JwtSigner&&) noexcept;
  JwtSigner& operator=(JwtSigner&&) noexcept;

  // The public key as a JWK object, and a set holding only it.
  nlohmann::json publicJwk() const;
  std::string jwks() const;
  // Signs `claims` under {"alg": alg, "kid": kid, "typ": "JWT"} merged with `headerExtra`.
  std::string sign(const nlohmann::json& claims,
                   const nlohmann::json& headerExtra = nlohmann::json::object()) const;
  // Signs exactly these base64url header and claims parts (for malformed-token tests).
  std::string signParts(const std::string& headerPart, const std::string& claimsPart) const;

  const std::string& alg() const { return alg_; }
  const std::string& kid() const { return kid_; }

 private:
  struct Key;
  JwtSigner(std::string alg, std::string kid, std::unique_ptr<Key> key);
  std::string alg_;
  std::string kid_;
  std::unique_ptr<Key> key_;
};

// Claims of a pod-bound service-account token as the API server issues them.
nlohmann::json serviceAccountClaims(const std::string& issuer, const std::string& audience,
                                    const std::string& ns, const std::string& serviceAccount,
                                    const std::string& pod, const std::string& podUid,
                                    std::int64_t issuedAt, std::int64_t expiresAt);

}  // namespace kshard::kube
