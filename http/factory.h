// The HTTP backend factory: callers pick a backend by name (from a flag or config) and get our
// interfaces, never the library's types.
//
//   kBeast    Boost.Beast/Asio: the data path (sidecar app and peer APIs, forwarding). Fastest.
//   kCppRest  cpprestsdk: the control plane, where its limits (see cpprest_server.h) do not matter.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "base/status.h"
#include "http/client.h"
#include "http/server.h"

namespace kshard::http {

enum class Backend { kCppRest, kBeast };

// "cpprest" | "beast".
std::string_view backendName(Backend backend);
std::optional<Backend> parseBackend(std::string_view name);

std::unique_ptr<Server> makeServer(Backend backend, ServerOptions options);
// InvalidArgument for a malformed baseUrl or unreadable TLS material.
StatusOr<std::unique_ptr<Client>> makeClient(Backend backend, ClientOptions options);

}  // namespace kshard::http
