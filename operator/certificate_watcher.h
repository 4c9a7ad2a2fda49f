// CertificateWatcher: notices when a TLS certificate and key on disk change, so that a server
// can be started again with them. The webhook's serving certificate is a mounted Secret, which
// cert-manager renews and the kubelet updates in place (an atomic swap of the volume's ..data
// symlink, which a watch on the files themselves would not see); a server that read the files
// only at start served the old certificate until it expired.
//
//   CertificateWatcher watcher(scheduler, logger, {cert, key, 10s},
//                              [&] { return webhook.restart().ok(); });
//   watcher.start();
//
// Every `interval` it reads both files and compares their contents with the pair last applied
// (so a touch does nothing); a change that leaves either file unreadable or empty is waited out.
// `onChange` runs on the scheduler's thread and says whether the new pair is in use: until it
// is, it is called again at every interval. Thread-safe.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "base/logger.h"
#include "base/scheduler.h"

namespace kshard::manager {

class CertificateWatcher {
 public:
  struct Options {
    std::string certFile;
    std::string keyFile;
    Duration interval = std::chrono::seconds(10);
  };

  // The pair as it is now is the one the server started with.
  CertificateWatcher(Scheduler& scheduler, Logger logger, Options options,
                     std::function<bool()> onChange);
  ~CertificateWatcher();

  void start();
  void stop();
  // Compares the files now, and calls onChange when they changed. start() runs it every interval.
  void check();

 private:
  // Both files' contents, or "" when either cannot be read or is empty.
  std::string readPair() const;
  void scheduleLocked();

  Scheduler& scheduler_;
  Logger log_;
  const Options options_;
  std::function<bool()> onChange_;
  std::mutex mu_;
  std::string seen_;
  bool running_ = false;
  Scheduler::TaskId timer_ = 0;
};

}  // namespace kshard::manager
