// TLS on both adapters: server certificates checked against a CA given as a file or as PEM data,
// verification failures, skip-verify, the server name, and client certificates (mutual TLS).
// Certificates are made at test time with the openssl command line.
#include <gtest/gtest.h>

#include "http/factory.h"
#include "tests/http/test_support.h"

namespace kshard::http {
namespace {

using testing::TestCerts;

class TlsTest : public ::testing::TestWithParam<Backend> {
 protected:
  void startServer(bool requireClientCert = false) {
    const TestCerts& certs = TestCerts::get();
    ASSERT_TRUE(certs.ok) << "making test certificates with openssl failed in " << certs.dir;
    ServerOptions o;
    o.tls = TlsServerOptions{certs.serverCert, certs.serverKey,
                             requireClientCert ? certs.caFile : std::string()};
    server_ = makeServer(GetParam(), o);
    server_->route(Method::kGet, "/hello", [](Request, Responder r) {
      Response res;
      res.body = "hello over tls";
      // The server closes the connection after the answer. Left open, the client closing it
      // without a TLS close_notify makes cpprestsdk's server answer it 400, racing with the
      // server's stop at the end of the test (see http/cpprest_server.h).
      res.headers.set("Connection", "close");
      r.send(std::move(res));
    });
    const Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.toString();
  }

  void TearDown() override {
    if (server_) server_->stop();
  }

  StatusOr<Response> call(ClientOptions o, const std::string& host = "127.0.0.1") {
    o.baseUrl = "https://" + host + ":" + std::to_string(server_->port());
    auto c = makeClient(GetParam(), o);
    if (!c.ok()) return c.status();
    Request r;
    r.target = "/hello";
    r.timeout = std::chrono::seconds(10);
    return (*c)->sendSync(std::move(r));
  }

  static void expectHello(const StatusOr<Response>& res) {
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "hello over tls");
  }

  static void expectRefused(const StatusOr<Response>& res) {
    ASSERT_FALSE(res.ok()) << "the TLS connection should have failed";
    EXPECT_EQ(res.status().code(), StatusCode::kUnavailable) << res.status().toString();
  }

  std::unique_ptr<Server> server_;
};

TEST_P(TlsTest, CaFileVerifiesTheServer) {
  startServer();
  ClientOptions o;
  o.tls.caFile = TestCerts::get().caFile;
  expectHello(call(o));
}

TEST_P(TlsTest, CaDataVerifiesTheServer) {
  startServer();
  ClientOptions o;
  o.tls.caData = testing::readFile(TestCerts::get().caFile);
  expectHello(call(o));
}

TEST_P(TlsTest, ServerSignedByAnotherCaIsRejected) {
  startServer();
  ClientOptions o;
  o.tls.caFile = TestCerts::get().otherCaFile;
  expectRefused(call(o));
}

TEST_P(TlsTest, InsecureSkipVerifyAcceptsAnUntrustedServer) {
  startServer();
  ClientOptions o;
  o.tls.caFile = TestCerts::get().otherCaFile;
  o.tls.insecureSkipVerify = true;
  expectHello(call(o));
}

TEST_P(TlsTest, ServerNameMustMatchTheCertificate) {
  startServer();
  ClientOptions o;
  o.tls.caFile = TestCerts::get().caFile;
  o.tls.serverName = "localhost";
  expectHello(call(o));
  o.tls.serverName = "not-this-server.example";
  expectRefused(call(o));
}

TEST_P(TlsTest, HostNameOfTheOriginIsVerified) {
  startServer();
  ClientOptions o;
  o.tls.caFile = TestCerts::get().caFile;
  expectHello(call(o, "localhost"));
}

TEST_P(TlsTest, ServerRequiringClientCertificatesRejectsAClientWithout) {
  startServer(/*requireClientCert=*/true);
  ClientOptions o;
  o.tls.caFile = TestCerts::get().caFile;
  expectRefused(call(o));
}

TEST_P(TlsTest, ClientCertificateFilesSatisfyMutualTls) {
  startServer(/*requireClientCert=*/true);
  ClientOptions o;
  o.tls.caFile = TestCerts::get().caFile;
  o.tls.certFile = TestCerts::get().clientCert;
  o.tls.keyFile = TestCerts::get().clientKey;
  expectHello(call(o));
}

TEST_P(TlsTest, ClientCertificateDataSatisfiesMutualTls) {
  startServer(/*requireClientCert=*/true);
  ClientOptions o;
  o.tls.caFile = TestCerts::get().caFile;
  o.tls.certData = testing::readFile(TestCerts::get().clientCert);
  o.tls.keyData = testing::readFile(TestCerts::get().clientKey);
  expectHello(call(o));
}

TEST_P(TlsTest, UnreadableTlsMaterialFailsClientCreation) {
  ClientOptions o;
  o.baseUrl = "https://127.0.0.1:1";
  o.tls.caFile = "/nonexistent/ca.crt";
  const auto c = makeClient(GetParam(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("/nonexistent/ca.crt"), std::string::npos);
  o.tls.caFile.clear();
  o.tls.certData = "not a certificate";
  EXPECT_FALSE(makeClient(GetParam(), o).ok()) << "a certificate without a key must be rejected";
}

TEST_P(TlsTest, UnreadableServingCertificateFailsStart) {
  ServerOptions o;
  o.tls = TlsServerOptions{"/nonexistent/server.crt", "/nonexistent/server.key", ""};
  auto server = makeServer(GetParam(), o);
  const Status s = server->start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/server.crt"), std::string::npos) << s.toString();
}

INSTANTIATE_TEST_SUITE_P(Backends, TlsTest, ::testing::Values(Backend::kCppRest, Backend::kBeast),
                         testing::backendTestName);

}  // namespace
}  // namespace kshard::http
