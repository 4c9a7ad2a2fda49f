#include "operator/certificate_watcher.h"

#include <utility>

#include "kube/token_source.h"

namespace kshard::manager {

CertificateWatcher::CertificateWatcher(Scheduler& scheduler, Logger logger, Options options,
                                       std::function<bool()> onChange)
    : scheduler_(scheduler),
      log_(std::move(logger)),
      options_(std::move(options)),
      onChange_(std::move(onChange)),
      seen_(readPair()) {}

CertificateWatcher::~CertificateWatcher() { stop(); }

void CertificateWatcher::start() {
  std::lock_guard lock(mu_);
  if (running_) return;
  running_ = true;
  scheduleLocked();
}

void CertificateWatcher::stop() {
  std::lock_guard lock(mu_);
  running_ = false;
  if (timer_ != 0) scheduler_.cancel(timer_);
  timer_ = 0;
}

void CertificateWatcher::scheduleLocked() {
  timer_ = scheduler_.runAfter(options_.interval, [this] {
    check();
    std::lock_guard lock(mu_);
    if (running_) scheduleLocked();
  });
}

std::string CertificateWatcher::readPair() const {
  auto cert = kube::readFile(options_.certFile);
  auto key = kube::readFile(options_.keyFile);
  if (!cert.ok() || !key.ok() || cert->empty() || key->empty()) return {};
  // The key's length first, so that no two different pairs give the same text.
  return std::to_string(key->size()) + ":" + *key + *cert;
}

void CertificateWatcher::check() {
  std::string now = readPair();
  {
    std::lock_guard lock(mu_);
    if (now.empty() || now == seen_) return;
  }
  log_.info("the certificate files changed; serving them",
            {{"cert_file", options_.certFile}, {"key_file", options_.keyFile}});
  if (!onChange_()) return;  // asked again at the next interval
  std::lock_guard lock(mu_);
  seen_ = std::move(now);
}

}  // namespace kshard::manager
