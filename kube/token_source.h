// TokenSource: where the bearer token of Kubernetes requests comes from. A ServiceAccount token
// mounted into a pod is rotated by the kubelet (bound tokens expire after an hour), so the file
// source re-reads the file periodically and at once after the API server rejected a token (401).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "base/clock.h"
#include "base/logger.h"
#include "base/status.h"

namespace kshard::kube {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // The token to send now; empty means send no Authorization header.
  virtual StatusOr<std::string> token() = 0;
  // The API server answered 401 to `rejected`. Returns true when a different token is now
  // available, so that retrying the request may succeed.
  virtual bool onUnauthorized(const std::string& rejected) = 0;
};

// A fixed token (kubeconfig `token`). Thread-safe.
class StaticTokenSource final : public TokenSource {
 public:
  explicit StaticTokenSource(std::string token) : token_(std::move(token)) {}
  StatusOr<std::string> token() override { return token_; }
  bool onUnauthorized(const std::string&) override { return false; }

 private:
  const std::string token_;
};

// A token file (in-cluster, kubeconfig `tokenFile`), re-read when the cached copy is older than
// `refresh` (client-go re-reads every minute) and after a 401. A read error keeps the last good
// token (the kubelet replaces the file atomically, but a transient error must not log us out).
// Thread-safe.
class FileTokenSource final : public TokenSource {
 public:
  FileTokenSource(std::string path, const Clock& clock,
                  Duration refresh = std::chrono::seconds(60));
  StatusOr<std::string> token() override;
  bool onUnauthorized(const std::string& rejected) override;
  const std::string& path() const { return path_; }

 private:
  Status readLocked();

  const std::string path_;
  const Clock& clock_;
  const Duration refresh_;
  std::mutex mu_;
  std::string token_;
  bool haveToken_ = false;
  SteadyTime readAt_{};
};

// The Authorization header value ("Bearer <token>") from a FileTokenSource on `path`, for
// clients that present a projected token to kshard's own APIs. When no token can be read it
// logs a warning naming `purpose` and the file, and gives "" (no header is sent).
std::function<std::string()> bearerHeaderFromFile(std::string path, const Clock& clock,
                                                  Logger log, std::string purpose);

// Reads a whole file; NotFound / PermissionDenied / Internal with the path and errno text.
StatusOr<std::string> readFile(const std::string& path);

}  // namespace kshard::kube
