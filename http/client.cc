#include "http/client.h"

#include <future>
#include <memory>

namespace kshard::http {

StatusOr<Response> Client::sendSync(Request request) {
  auto promise = std::make_shared<std::promise<StatusOr<Response>>>();
  std::future<StatusOr<Response>> result = promise->get_future();
  send(std::move(request),
       [promise](StatusOr<Response> response) { promise->set_value(std::move(response)); });
  return result.get();
}

}  // namespace kshard::http
