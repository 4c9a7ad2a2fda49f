// The component tests' API server: the in-memory FakeApiServer (tests/kube/fake_api_server.h)
// behind a real HTTP server on loopback, for the ShardEntities records of the sidecar processes
// (their --kubeconfig names it), with a kubeconfig file that points at it.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "base/clock.h"
#include "http/factory.h"
#include "tests/kube/fake_api_server.h"
#include "tests/support/subprocess.h"

namespace kshard::sidecar {

class ComponentApiServer {
 public:
  ComponentApiServer() {
    http::ServerOptions o;
    o.port = kshard::testing::freeLoopbackPort();
    server_ = http::makeServer(http::Backend::kBeast, o);
    const std::string collection = "/apis/kshard.io/v1alpha1/namespaces/{ns}/shardentities";
    for (auto method : {http::Method::kGet, http::Method::kPost}) {
      server_->route(method, collection, forward());
    }
    for (auto method : {http::Method::kGet, http::Method::kPut}) {
      server_->route(method, collection + "/{name}", forward());
    }
    EXPECT_TRUE(server_->start().ok());
    kubeconfig_ = ::testing::TempDir() + "/kubeconfig-" + std::to_string(server_->port());
    std::ofstream(kubeconfig_)
        << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
           "clusters:\n- name: test\n  cluster:\n    server: http://127.0.0.1:"
        << server_->port()
        << "\ncontexts:\n- name: test\n  context:\n    cluster: test\n"
           "    user: test\nusers:\n- name: test\n  user: {}\n";
  }
  ~ComponentApiServer() { server_->stop(); }

  // The file to pass as --kubeconfig.
  const std::string& kubeconfig() const { return kubeconfig_; }
  kube::testing::FakeApiServer& api() { return api_; }

 private:
  http::Handler forward() {
    return [this](http::Request r, http::Responder res) {
      api_.send(std::move(r), [res = std::move(res)](StatusOr<http::Response> answer) mutable {
        res.send(answer.ok() ? std::move(*answer)
                             : http::Response::json(500, R"({"kind":"Status","code":500})"));
      });
    };
  }

  kube::testing::FakeApiServer api_{SystemClock::instance()};
  std::unique_ptr<http::Server> server_;
  std::string kubeconfig_;
};

}  // namespace kshard::sidecar
