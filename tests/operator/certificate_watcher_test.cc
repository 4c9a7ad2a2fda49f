#include "operator/certificate_watcher.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

namespace kshard::manager {
namespace {

using namespace std::chrono_literals;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

class CertificateWatcherTest : public ::testing::Test {
 protected:
  CertificateWatcherTest() {
    write(cert_, "CERT-1");
    write(key_, "KEY-1");
    watcher_.emplace(scheduler_, Logger("test", LogLevel::kError, [](std::string_view) {}),
                     CertificateWatcher::Options{cert_, key_, 10s}, [this] {
                       ++changes_;
                       return applies_;
                     });
    watcher_->start();
  }
  ~CertificateWatcherTest() override {
    watcher_.reset();
    std::remove(cert_.c_str());
    std::remove(key_.c_str());
  }

  // ctest runs each test in its own process, two at a time: every test needs files of its own.
  static std::string pathFor(const char* suffix) {
    return ::testing::TempDir() + "/watcher-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + suffix;
  }

  const std::string cert_ = pathFor(".crt");
  const std::string key_ = pathFor(".key");
  ManualScheduler scheduler_;
  std::optional<CertificateWatcher> watcher_;
  int changes_ = 0;
  bool applies_ = true;
};

// Issue 29: the webhook read its certificate only at start, so a renewal by cert-manager was
// served only after a restart (or not at all, once the old one expired).
TEST_F(CertificateWatcherTest, ARenewedPairIsNoticedWithinOneInterval) {
  scheduler_.advance(30s);
  EXPECT_EQ(changes_, 0) << "unchanged files are not a change";
  write(cert_, "CERT-2");
  write(key_, "KEY-2");
  scheduler_.advance(10s);
  EXPECT_EQ(changes_, 1);
  scheduler_.advance(60s);
  EXPECT_EQ(changes_, 1) << "one change is reported once";
}

TEST_F(CertificateWatcherTest, TheSameContentWrittenAgainIsNoChange) {
  write(cert_, "CERT-1");
  write(key_, "KEY-1");
  scheduler_.advance(20s);
  EXPECT_EQ(changes_, 0);
}

TEST_F(CertificateWatcherTest, AMissingOrEmptyFileIsWaitedOut) {
  std::remove(key_.c_str());
  write(cert_, "CERT-2");
  scheduler_.advance(10s);
  EXPECT_EQ(changes_, 0) << "a change with the key missing";
  write(key_, "");
  scheduler_.advance(10s);
  EXPECT_EQ(changes_, 0) << "a change with the key empty";
  write(key_, "KEY-2");
  scheduler_.advance(10s);
  EXPECT_EQ(changes_, 1);
}

TEST_F(CertificateWatcherTest, AChangeThatCouldNotBeAppliedIsTriedAgain) {
  applies_ = false;
  write(cert_, "CERT-2");
  scheduler_.advance(20s);
  EXPECT_EQ(changes_, 2);
  applies_ = true;
  scheduler_.advance(10s);
  EXPECT_EQ(changes_, 3);
  scheduler_.advance(30s);
  EXPECT_EQ(changes_, 3);
}

TEST_F(CertificateWatcherTest, NothingIsCheckedAfterStop) {
  watcher_->stop();
  write(cert_, "CERT-2");
  scheduler_.advance(60s);
  EXPECT_EQ(changes_, 0);
}

}  // namespace
}  // namespace kshard::manager
