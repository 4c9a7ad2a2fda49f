#include "kube/jwt_signer.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <cstdio>
#include <cstdlib>

#include "base/base64.h"

namespace kshard::kube {

using nlohmann::json;

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "JwtSigner: %s failed\n", what);
  std::abort();
}

std::string bnBytes(const BIGNUM* bn, int width = 0) {
  const int n = width > 0 ? width : BN_num_bytes(bn);
  std::string out(static_cast<std::size_t>(n), '\0');
  if (BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), n) != n) die("BN_bn2binpad");
  return out;
}

BIGNUM* bnParam(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &bn) != 1) die(name);
  return bn;
}

}  // namespace

struct JwtSigner::Key {
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

JwtSigner::JwtSigner(std::string alg, std::string kid, std::unique_ptr<Key> key)
    : alg_(std::move(alg)), kid_(std::move(kid)), key_(std::move(key)) {}
JwtSigner::~JwtSigner() = default;
JwtSigner::JwtSigner(JwtSigner&&) noexcept = default;
JwtSigner& JwtSigner::operator=(JwtSigner&&) noexcept = default;

JwtSigner JwtSigner::generate(const std::string& alg, std::string kid) {
  auto key = std::make_unique<Key>();
  if (alg == "RS256") {
    key->pkey = EVP_RSA_gen(2048);
  } else if (alg == "ES256" || alg == "ES384") {
    // EVP_EC_gen is a macro that casts away const; the long form keeps -Wcast-qual quiet.
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
    if (ctx == nullptr || EVP_PKEY_keygen_init(ctx) != 1 ||
        EVP_PKEY_CTX_set_group_name(ctx, alg == "ES256" ? "P-256" : "P-384") != 1 ||
        EVP_PKEY_generate(ctx, &key->pkey) != 1) {
      die("EC key generation");
    }
    EVP_PKEY_CTX_free(ctx);
  } else {
    die("unknown alg");
  }
  if (key->pkey == nullptr) die("key generation");
  return JwtSigner(alg, std::move(kid), std::move(key));
}

json JwtSigner::publicJwk() const {
  json jwk = {{"use", "sig"}, {"kid", kid_}, {"alg", alg_}};
  if (alg_ == "RS256") {
    BIGNUM* n = bnParam(key_->pkey, OSSL_PKEY_PARAM_RSA_N);
    BIGNUM* e = bnParam(key_->pkey, OSSL_PKEY_PARAM_RSA_E);
    jwk["kty"] = "RSA";
    jwk["n"] = base64UrlEncode(bnBytes(n));
    jwk["e"] = base64UrlEncode(bnBytes(e));
    BN_free(n);
    BN_free(e);
  } else {
    const int width = alg_ == "ES256" ? 32 : 48;
    BIGNUM* x = bnParam(key_->pkey, OSSL_PKEY_PARAM_EC_PUB_X);
    BIGNUM* y = bnParam(key_->pkey, OSSL_PKEY_PARAM_EC_PUB_Y);
    jwk["kty"] = "EC";
    jwk["crv"] = alg_ == "ES256" ? "P-256" : "P-384";
    jwk["x"] = base64UrlEncode(bnBytes(x, width));
    jwk["y"] = base64UrlEncode(bnBytes(y, width));
    BN_free(x);
    BN_free(y);
  }
  return jwk;
}

std::string JwtSigner::jwks() const { return json{{"keys", json::array({publicJwk()})}}.dump(); }

std::string JwtSigner::sign(const json& claims, const json& headerExtra) const {
  json header = {{"alg", alg_}, {"kid", kid_}, {"typ", "JWT"}};
  header.update(headerExtra);
  return signParts(base64UrlEncode(header.dump()), base64UrlEncode(claims.dump()));
}

std::string JwtSigner::signParts(const std::string& headerPart,
                                 const std::string& claimsPart) const {
  const std::string input = headerPart + "." + claimsPart;
  const EVP_MD* md = alg_ == "ES384" ? EVP_sha384() : EVP_sha256();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::size_t len = 0;
  if (ctx == nullptr || EVP_DigestSignInit(ctx, nullptr, md, nullptr, key_->pkey) != 1 ||
      EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                     input.size()) != 1) {
    die("EVP_DigestSign");
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    die("EVP_DigestSign");
  }
  EVP_MD_CTX_free(ctx);
  sig.resize(len);
  if (alg_ != "RS256") {  // DER → r || s
    const auto* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    if (es == nullptr) die("d2i_ECDSA_SIG");
    const int width = alg_ == "ES256" ? 32 : 48;
    sig = bnBytes(ECDSA_SIG_get0_r(es), width) + bnBytes(ECDSA_SIG_get0_s(es), width);
    ECDSA_SIG_free(es);
  }
  return input + "." + base64UrlEncode(sig);
}

json serviceAccountClaims(const std::string& issuer, const std::string& audience,
                          const std::string& ns, const std::string& serviceAccount,
                          const std::string& pod, const std::string& podUid,
                          std::int64_t issuedAt, std::int64_t expiresAt) {
  return {{"iss", issuer},
          {"aud", json::array({audience})},
          {"sub", "system:serviceaccount:" + ns + ":" + serviceAccount},
          {"iat", issuedAt},
          {"nbf", issuedAt},
          {"exp", expiresAt},
          {"kubernetes.io",
           {{"namespace", ns},
            {"pod", {{"name", pod}, {"uid", podUid}}},
            {"serviceaccount", {{"name", serviceAccount}, {"uid", "sa-uid"}}}}}};
}

}  // namespace kshard::kube
