#include "http/factory.h"

#include "http/beast_client.h"
#include "http/beast_server.h"
#include "http/cpprest_client.h"
#include "http/cpprest_server.h"

namespace kshard::http {

std::string_view backendName(Backend backend) {
  return backend == Backend::kBeast ? "beast" : "cpprest";
}

std::optional<Backend> parseBackend(std::string_view name) {
  if (name == "beast") return Backend::kBeast;
  if (name == "cpprest") return Backend::kCppRest;
  return std::nullopt;
}

std::unique_ptr<Server> makeServer(Backend backend, ServerOptions options) {
  if (backend == Backend::kBeast) return std::make_unique<BeastServer>(std::move(options));
  return std::make_unique<CppRestServer>(std::move(options));
}

StatusOr<std::unique_ptr<Client>> makeClient(Backend backend, ClientOptions options) {
  if (backend == Backend::kBeast) return makeBeastClient(std::move(options));
  return makeCppRestClient(std::move(options));
}

}  // namespace kshard::http
