#include "http/internal/tls_context.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/buffer.hpp>

namespace kshard::http {

namespace {

using boost::asio::ssl::context;

Status failed(std::string what, const boost::system::error_code& ec) {
  return invalidArgument(what + ": " + ec.message());
}

}  // namespace

Status configureClientTls(context& ctx, const TlsClientOptions& tls) {
  boost::system::error_code ec;
  ctx.set_options(context::default_workarounds | context::no_sslv2 | context::no_sslv3 |
                      context::no_tlsv1 | context::no_tlsv1_1,
                  ec);
  if (ec) return failed("setting TLS options", ec);
  if (!tls.caData.empty() || !tls.caFile.empty()) {
    // Trust exactly the configured CA: a context may come with the system store loaded
    // (cpprestsdk loads it before our callback runs), and a cluster CA must not be widened to
    // every public CA.
    X509_STORE* store = X509_STORE_new();
    if (store == nullptr) return internalError("allocating a certificate store failed");
    SSL_CTX_set_cert_store(ctx.native_handle(), store);
    if (!tls.caData.empty()) {
      ctx.add_certificate_authority(boost::asio::buffer(tls.caData), ec);
      if (ec) return failed("loading the CA certificate data", ec);
    }
    if (!tls.caFile.empty()) {
      ctx.load_verify_file(tls.caFile, ec);
      if (ec) return failed("loading the CA file " + tls.caFile, ec);
    }
  } else {
    ctx.set_default_verify_paths(ec);
    if (ec) return failed("loading the system CA store", ec);
  }

  const bool hasCert = !tls.certData.empty() || !tls.certFile.empty();
  const bool hasKey = !tls.keyData.empty() || !tls.keyFile.empty();
  if (hasCert != hasKey) {
    return invalidArgument("a client certificate needs both the certificate and its key");
  }
  if (!tls.certData.empty()) {
    ctx.use_certificate_chain(boost::asio::buffer(tls.certData), ec);
    if (ec) return failed("loading the client certificate data", ec);
  } else if (!tls.certFile.empty()) {
    ctx.use_certificate_chain_file(tls.certFile, ec);
    if (ec) return failed("loading the client certificate file " + tls.certFile, ec);
  }
  if (!tls.keyData.empty()) {
    ctx.use_private_key(boost::asio::buffer(tls.keyData), context::pem, ec);
    if (ec) return failed("loading the client key data", ec);
  } else if (!tls.keyFile.empty()) {
    ctx.use_private_key_file(tls.keyFile, context::pem, ec);
    if (ec) return failed("loading the client key file " + tls.keyFile, ec);
  }
  return {};
}

Status configureServerTls(context& ctx, const TlsServerOptions& tls) {
  boost::system::error_code ec;
  ctx.set_options(context::default_workarounds | context::no_sslv2 | context::no_sslv3 |
                      context::no_tlsv1 | context::no_tlsv1_1 | context::single_dh_use,
                  ec);
  if (ec) return failed("setting TLS options", ec);
  ctx.use_certificate_chain_file(tls.certFile, ec);
  if (ec) return failed("loading the serving certificate " + tls.certFile, ec);
  ctx.use_private_key_file(tls.keyFile, context::pem, ec);
  if (ec) return failed("loading the serving key " + tls.keyFile, ec);
  if (!tls.clientCaFile.empty()) {
    ctx.load_verify_file(tls.clientCaFile, ec);
    if (ec) return failed("loading the client CA file " + tls.clientCaFile, ec);
    ctx.set_verify_mode(context::verify_peer | context::verify_fail_if_no_peer_cert, ec);
    if (ec) return failed("requiring client certificates", ec);
  }
  return {};
}

}  // namespace kshard::http
