#include "kube/token_source.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kshard::kube {
namespace {

std::string trimmed(std::string s) {
  const auto notSpace = [](char c) { return c != ' ' && c != '\n' && c != '\r' && c != '\t'; };
  std::size_t b = 0;
  while (b < s.size() && !notSpace(s[b])) ++b;
  std::size_t e = s.size();
  while (e > b && !notSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

}  // namespace

StatusOr<std::string> readFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const StatusCode code = err == ENOENT   ? StatusCode::kNotFound
                            : err == EACCES ? StatusCode::kPermissionDenied
                                            : StatusCode::kInternal;
    return Status(code,
                  "cannot read " + path + ": " + (err != 0 ? std::strerror(err) : "open failed"));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Status(StatusCode::kInternal, "error reading " + path);
  return out.str();
}

FileTokenSource::FileTokenSource(std::string path, const Clock& clock, Duration refresh)
    : path_(std::move(path)), clock_(clock), refresh_(refresh) {}

Status FileTokenSource::readLocked() {
  auto content = readFile(path_);
  if (!content.ok()) return content.status();
  std::string token = trimmed(std::move(*content));
  if (token.empty())
    return Status(StatusCode::kUnauthenticated, "token file " + path_ + " is empty");
  token_ = std::move(token);
  haveToken_ = true;
  readAt_ = clock_.now();
  return {};
}

StatusOr<std::string> FileTokenSource::token() {
  std::lock_guard lock(mu_);
  if (!haveToken_ || clock_.now() - readAt_ >= refresh_) {
    Status s = readLocked();
    if (!s.ok() && !haveToken_) {
      return Status(StatusCode::kUnauthenticated, "no bearer token: " + s.message());
    }
  }
  return token_;
}

bool FileTokenSource::onUnauthorized(const std::string& rejected) {
  std::lock_guard lock(mu_);
  // Another request may have re-read the file already.
  if (haveToken_ && token_ != rejected) return true;
  if (!readLocked().ok()) return false;
  return token_ != rejected;
}

std::function<std::string()> bearerHeaderFromFile(std::string path, const Clock& clock,
                                                  Logger log, std::string purpose) {
  auto tokens = std::make_shared<FileTokenSource>(std::move(path), clock);
  return [tokens, log = std::move(log), purpose = std::move(purpose)]() -> std::string {
    auto token = tokens->token();
    if (!token.ok() || token->empty()) {
      log.warn("no token for " + purpose,
               {{"file", tokens->path()},
                {"error", token.ok() ? std::string("empty") : token.status().toString()}});
      return {};
    }
    return "Bearer " + *token;
  };
}

}  // namespace kshard::kube
