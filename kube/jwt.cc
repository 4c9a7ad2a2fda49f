#include "kube/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/base64.h"

namespace kshard::kube {

using nlohmann::json;

namespace {

enum class Alg { kRS256, kES256, kES384 };

struct AlgInfo {
  std::string_view name;
  Alg alg;
  bool rsa;
  std::string_view curve;  // OpenSSL group name, for EC
  std::size_t coordinateBytes;
};

constexpr AlgInfo kAlgs[] = {
    {"RS256", Alg::kRS256, true, "", 0},
    {"ES256", Alg::kES256, false, "prime256v1", 32},
    {"ES384", Alg::kES384, false, "secp384r1", 48},
};

const AlgInfo* algByName(std::string_view name) {
  for (const auto& a : kAlgs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const EVP_MD* digestOf(Alg alg) { return alg == Alg::kES384 ? EVP_sha384() : EVP_sha256(); }

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Status unauth(std::string message) { return unauthenticated(std::move(message)); }

std::optional<std::string> stringField(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// EVP_PKEY from the JWK's parameters (RFC 7518 section 6); nothing when they are malformed.
Pkey rsaKey(const std::string& n, const std::string& e) {
  if (n.size() < 256 || n.size() > 1024 || e.empty() || e.size() > 8) return nullptr;  // 2048..8192 bits
  BIGNUM* bn = BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()),
                         static_cast<int>(n.size()), nullptr);
  BIGNUM* be = BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()),
                         static_cast<int>(e.size()), nullptr);
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  OSSL_PARAM* params = nullptr;
  EVP_PKEY_CTX* ctx = nullptr;
  EVP_PKEY* key = nullptr;
  if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
      OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) &&
      (params = OSSL_PARAM_BLD_to_param(bld)) != nullptr &&
      (ctx = EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr)) != nullptr &&
      EVP_PKEY_fromdata_init(ctx) > 0) {
    if (EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) <= 0) key = nullptr;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  BN_free(bn);
  BN_free(be);
  return Pkey(key);
}

Pkey ecKey(std::string_view curve, const std::string& x, const std::string& y) {
  std::string point = "\x04" + x + y;  // uncompressed SEC1 point
  std::string curveName(curve);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, curveName.data(), 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      OSSL_PARAM_construct_end()};
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
  EVP_PKEY* key = nullptr;
  if (ctx && EVP_PKEY_fromdata_init(ctx) > 0 &&
      EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) <= 0) {
    key = nullptr;
  }
  EVP_PKEY_CTX_free(ctx);
  if (key == nullptr) return nullptr;
  // fromdata does not check that the point is on the curve; a public check does.
  EVP_PKEY_CTX* check = EVP_PKEY_CTX_new_from_pkey(nullptr, key, nullptr);
  const bool onCurve = check != nullptr && EVP_PKEY_public_check(check) == 1;
  EVP_PKEY_CTX_free(check);
  if (!onCurve) {
    EVP_PKEY_free(key);
    return nullptr;
  }
  return Pkey(key);
}

// JWS ES* signatures are r || s, fixed width; OpenSSL verifies DER.
std::optional<std::string> ecdsaDer(std::string_view raw, std::size_t coordinateBytes) {
  if (raw.size() != 2 * coordinateBytes) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
  BIGNUM* r = BN_bin2bn(p, static_cast<int>(coordinateBytes), nullptr);
  BIGNUM* s = BN_bin2bn(p + coordinateBytes, static_cast<int>(coordinateBytes), nullptr);
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (!r || !s || !sig || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  const int len = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  if (len <= 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  return out;
}

bool verifySignature(EVP_PKEY* key, const EVP_MD* md, std::string_view signedPart,
                     std::string_view signature) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, md, nullptr, key) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(),
                             reinterpret_cast<const unsigned char*>(signedPart.data()),
                             signedPart.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

// An integer NumericDate (RFC 7519 section 2); fractions are truncated, as Kubernetes does.
std::optional<std::int64_t> numericDate(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto u = it->get<std::uint64_t>();
    return u > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(u);
  }
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (d >= -9.2e18 && d <= 9.2e18) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

StatusOr<json> decodeJsonPart(std::string_view part, const char* what) {
  auto bytes = base64UrlDecode(part);
  if (!bytes) return unauth(std::string("token ") + what + " is not base64url");
  json j = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return unauth(std::string("token ") + what + " is not a JSON object");
  return j;
}

std::string stringAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* name : path) {
    if (!at->is_object()) return {};
    auto it = at->find(name);
    if (it == at->end()) return {};
    at = &*it;
  }
  return at->is_string() ? at->get<std::string>() : std::string();
}

}  // namespace

struct Jwk {
  std::string kid;
  std::string alg;  // the key's own alg, when it names one
  bool rsa = false;
  std::string curve;
  Pkey key;
};

JwkSet::JwkSet() = default;
JwkSet::~JwkSet() = default;
JwkSet::JwkSet(JwkSet&&) noexcept = default;
JwkSet& JwkSet::operator=(JwkSet&&) noexcept = default;

StatusOr<JwkSet> JwkSet::parse(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array()) {
    return invalidArgument("JWKS: not a JSON object with a \"keys\" array");
  }
  JwkSet set;
  for (const json& k : j["keys"]) {
    if (!k.is_object()) {
      ++set.skipped_;
      continue;
    }
    auto jwk = std::make_unique<Jwk>();
    const auto kty = stringField(k, "kty");
    const auto use = stringField(k, "use");
    jwk->kid = stringField(k, "kid").value_or("");
    jwk->alg = stringField(k, "alg").value_or("");
    if ((use && *use != "sig") || (!jwk->alg.empty() && algByName(jwk->alg) == nullptr)) {
      ++set.skipped_;
      continue;
    }
    const auto decoded = [&](const char* name) {
      auto v = stringField(k, name);
      return v ? base64UrlDecode(*v) : std::nullopt;
    };
    if (kty == "RSA") {
      auto n = decoded("n");
      auto e = decoded("e");
      if (n && e) jwk->key = rsaKey(*n, *e);
      jwk->rsa = true;
    } else if (kty == "EC") {
      const auto crv = stringField(k, "crv").value_or("");
      auto x = decoded("x");
      auto y = decoded("y");
      for (const auto& a : kAlgs) {
        const bool named = (crv == "P-256" && a.alg == Alg::kES256) ||
                           (crv == "P-384" && a.alg == Alg::kES384);
        if (named && x && y && x->size() == a.coordinateBytes &&
            y->size() == a.coordinateBytes) {
          jwk->curve = std::string(a.curve);
          jwk->key = ecKey(a.curve, *x, *y);
        }
      }
    }
    if (!jwk->key) {
      ++set.skipped_;
      continue;
    }
    set.keys_.push_back(std::move(jwk));
  }
  if (set.keys_.empty()) {
    return invalidArgument("JWKS: no usable signing key (RSA, or EC P-256/P-384) among " +
                           std::to_string(set.skipped_));
  }
  return set;
}

std::vector<std::string> JwkSet::keyIds() const {
  std::vector<std::string> ids;
  for (const auto& k : keys_) ids.push_back(k->kid);
  return ids;
}

namespace {

// A compact JWS (RFC 7515 section 7.1) cut at its dots, each part still base64url-encoded.
struct TokenParts {
  std::string_view header;
  std::string_view claims;
  std::string_view signature;
  std::string_view signedPart;  // "header.claims", what the signature covers
};

StatusOr<TokenParts> splitToken(std::string_view token) {
  if (token.empty()) return unauth("no token");
  if (token.size() > kMaxJwtBytes) {
    return unauth("token longer than " + std::to_string(kMaxJwtBytes) + " bytes");
  }
  const auto dot1 = token.find('.');
  const auto dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return unauth("token is not a JWT (three dot-separated parts)");
  }
  return TokenParts{.header = token.substr(0, dot1),
                    .claims = token.substr(dot1 + 1, dot2 - dot1 - 1),
                    .signature = token.substr(dot2 + 1),
                    .signedPart = token.substr(0, dot2)};
}

// The header's algorithm, one of kAlgs; a header with critical parameters is refused.
StatusOr<const AlgInfo*> headerAlgorithm(const json& header) {
  const std::string algName = stringAt(header, {"alg"});
  const AlgInfo* alg = algByName(algName);
  if (alg == nullptr) {
    return unauth("token algorithm \"" + algName.substr(0, 16) +
                  "\" is not accepted (RS256, ES256, ES384)");
  }
  if (header.contains("crit")) return unauth("token has critical header parameters");
  return alg;
}

// The key the token names with `kid` (every key when it names none), of the algorithm's type and
// curve, and of its `alg` when the key has one. NotFound when no key has that kid: the caller
// may refresh the set.
StatusOr<const Jwk*> keyFor(const JwkSet& keys, const AlgInfo& alg, const std::string& kid) {
  bool kidKnown = false;
  for (const auto& k : keys.keys()) {
    if (!kid.empty() && k->kid != kid) continue;
    kidKnown = true;
    const bool fits = alg.rsa ? k->rsa : (!k->rsa && k->curve == alg.curve);
    if (fits && (k->alg.empty() || k->alg == alg.name)) return k.get();
  }
  if (!kidKnown) return notFound("no issuer key with kid \"" + kid.substr(0, 64) + "\"");
  return unauth("token algorithm " + std::string(alg.name) + " does not match its key \"" +
                kid.substr(0, 64) + "\"");
}

Status checkSignature(const TokenParts& parts, const AlgInfo& alg, const Jwk& key) {
  auto signature = base64UrlDecode(parts.signature);
  if (!signature) return unauth("token signature is not base64url");
  std::string der;
  std::string_view sig = *signature;
  if (!alg.rsa) {
    auto converted = ecdsaDer(*signature, alg.coordinateBytes);
    if (!converted) {
      return unauth("token signature has the wrong length for " + std::string(alg.name));
    }
    der = std::move(*converted);
    sig = der;
  }
  if (!verifySignature(key.key.get(), digestOf(alg.alg), parts.signedPart, sig)) {
    return unauth("token signature does not verify");
  }
  return Status{};
}

// `aud`: a string or an array of them (RFC 7519 section 4.1.3); other values are ignored.
std::vector<std::string> audiencesOf(const json& claims) {
  std::vector<std::string> audiences;
  if (auto aud = claims.find("aud"); aud != claims.end()) {
    if (aud->is_string()) audiences.push_back(aud->get<std::string>());
    if (aud->is_array()) {
      for (const auto& a : *aud) {
        if (a.is_string()) audiences.push_back(a.get<std::string>());
      }
    }
  }
  return audiences;
}

// `exp` (required, not past) and `nbf` (not in the future), both with the expected leeway, into
// `out`.
Status checkValidity(const json& claims, const JwtExpectations& expect, JwtClaims& out) {
  const auto exp = numericDate(claims, "exp");
  if (!exp) return unauth("token has no expiry (exp)");
  out.expiresAt = *exp;
  // now ± leeway cannot overflow (now is a real time); exp and nbf may be anything.
  if (out.expiresAt < expect.now - expect.leewaySeconds) {
    return unauth("token expired at " + std::to_string(out.expiresAt) + " (now " +
                  std::to_string(expect.now) + ")");
  }
  if (claims.contains("nbf")) {
    const auto nbf = numericDate(claims, "nbf");
    if (!nbf) return unauth("token nbf is not a number");
    out.notBefore = *nbf;
    if (out.notBefore > expect.now + expect.leewaySeconds) {
      return unauth("token not valid before " + std::to_string(out.notBefore));
    }
  }
  return Status{};
}

// The verified token's claims, checked against the expected issuer, audience and time.
StatusOr<JwtClaims> readClaims(const json& claims, const JwtExpectations& expect) {
  JwtClaims out;
  out.issuer = stringAt(claims, {"iss"});
  out.subject = stringAt(claims, {"sub"});
  if (!expect.issuer.empty() && out.issuer != expect.issuer) {
    return unauth("token issuer \"" + out.issuer.substr(0, 128) + "\" is not the cluster's (" +
                  expect.issuer + ")");
  }
  out.audiences = audiencesOf(claims);
  if (std::find(out.audiences.begin(), out.audiences.end(), expect.audience) ==
      out.audiences.end()) {
    return unauth("token is not for audience " + expect.audience);
  }
  if (Status valid = checkValidity(claims, expect, out); !valid.ok()) return valid;
  out.namespace_ = stringAt(claims, {"kubernetes.io", "namespace"});
  out.serviceAccount = stringAt(claims, {"kubernetes.io", "serviceaccount", "name"});
  out.podName = stringAt(claims, {"kubernetes.io", "pod", "name"});
  out.podUid = stringAt(claims, {"kubernetes.io", "pod", "uid"});
  return out;
}

}  // namespace

StatusOr<JwtClaims> verifyJwt(std::string_view token, const JwkSet& keys,
                              const JwtExpectations& expect) {
  auto parts = splitToken(token);
  if (!parts.ok()) return parts.status();
  auto header = decodeJsonPart(parts->header, "header");
  if (!header.ok()) return header.status();
  auto alg = headerAlgorithm(*header);
  if (!alg.ok()) return alg.status();
  const std::string kid = stringAt(*header, {"kid"});
  auto key = keyFor(keys, **alg, kid);
  if (!key.ok()) return key.status();
  if (Status verified = checkSignature(*parts, **alg, **key); !verified.ok()) return verified;

  auto claims = decodeJsonPart(parts->claims, "claims");
  if (!claims.ok()) return claims.status();
  auto out = readClaims(*claims, expect);
  if (out.ok()) out->keyId = kid;
  return out;
}

std::string_view bearerToken(std::string_view header) {
  constexpr std::string_view kScheme = "Bearer ";
  if (header.size() <= kScheme.size()) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i]))) {
      return {};
    }
  }
  std::string_view token = header.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

}  // namespace kshard::kube
