// PeerHttpClient: the PeerClient over HTTP, with one keep-alive client per peer address.
//
// Clients for addresses that were not used recently are dropped once more than `maxPeers` exist
// (pods come and go in a rolling update), but never while a request is in flight on them (its
// callback included).
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "http/client.h"
#include "sidecar/peer_client.h"

namespace kshard::sidecar {

class PeerHttpClient final : public PeerClient {
 public:
  // Makes a client for "http://ip:port".
  using ClientFactory = std::function<std::unique_ptr<http::Client>(const std::string& baseUrl)>;
  // `authorization` (optional) returns the Authorization header value for each request.
  PeerHttpClient(ClientFactory factory, std::size_t maxPeers = 512,
                 std::function<std::string()> authorization = nullptr);

  void forward(const RouteOwner& owner, std::shared_ptr<const Message> message, Epoch senderEpoch,
               Duration timeout, ForwardCallback done) override;
  void publish(const RouteOwner& pod, std::shared_ptr<const Publication> publication,
               Duration timeout, ForwardCallback done) override;

  // How a transport result maps onto the router's retry decision.
  static ForwardResult classify(StatusOr<http::Response> result);

 private:
  struct Entry {
    std::unique_ptr<http::Client> client;
    std::shared_ptr<std::atomic<int>> inFlight;
    std::list<std::string>::iterator pos;
  };
  Entry& entryFor(const std::string& address);
  // Sends `request` to `address` on its client and calls `done` with the classified result.
  void send(const std::string& address, http::Request request, ForwardCallback done);

  ClientFactory factory_;
  std::size_t maxPeers_;
  std::function<std::string()> authorization_;
  std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, Entry> clients_;
};

// The peer API path of a forwarded message: "/v1/peer/entities/{type}/{id}".
std::string peerEntityPath(const EntityKey& key);
// The peer API path of a publication: "/v1/peer/topics/{topic}[?entities={type}]".
std::string peerTopicPath(const Publication& publication);

}  // namespace kshard::sidecar
