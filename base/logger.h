// Logger: structured logs, one JSON object per line.
//
//   log.info("shards assigned", {{"shard_map", "demo/counter"}, {"pod", pod}, {"count", 12}});
//   -> {"ts":"2026-11-22T10:31:02.114Z","level":"info","component":"operator",
//       "msg":"shards assigned","shard_map":"demo/counter","pod":"counter-1","count":12}
//
// The message is a constant; everything variable goes into fields. Loggers are cheap values that
// share a sink; `withFields` returns a child that adds fields to every line.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/clock.h"

namespace kshard {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };

std::string_view logLevelName(LogLevel level);
// "debug" | "info" | "warn" | "error"; false when unknown.
bool parseLogLevel(std::string_view text, LogLevel& out);

class LogValue {
 public:
  using Variant = std::variant<std::string, std::int64_t, std::uint64_t, double, bool>;
  LogValue(const char* v) : v_(std::string(v)) {}                        // NOLINT
  LogValue(std::string_view v) : v_(std::string(v)) {}                   // NOLINT
  LogValue(std::string v) : v_(std::move(v)) {}                          // NOLINT
  LogValue(bool v) : v_(v) {}                                            // NOLINT
  LogValue(double v) : v_(v) {}                                          // NOLINT
  LogValue(int v) : v_(static_cast<std::int64_t>(v)) {}                  // NOLINT
  LogValue(long v) : v_(static_cast<std::int64_t>(v)) {}                 // NOLINT
  LogValue(long long v) : v_(static_cast<std::int64_t>(v)) {}            // NOLINT
  LogValue(unsigned v) : v_(static_cast<std::uint64_t>(v)) {}            // NOLINT
  LogValue(unsigned long v) : v_(static_cast<std::uint64_t>(v)) {}       // NOLINT
  LogValue(unsigned long long v) : v_(static_cast<std::uint64_t>(v)) {}  // NOLINT
  const Variant& get() const { return v_; }

 private:
  Variant v_;
};

using LogField = std::pair<std::string, LogValue>;
using LogFields = std::vector<LogField>;

// Where finished lines go. Must be thread-safe; the default writes to stderr with one write per
// line.
using LogSink = std::function<void(std::string_view line)>;

class Logger {
 public:
  // Writes to stderr at `minLevel`.
  explicit Logger(std::string component, LogLevel minLevel = LogLevel::kInfo);
  Logger(std::string component, LogLevel minLevel, LogSink sink,
         const Clock& clock = SystemClock::instance());

  Logger withFields(LogFields fields) const;
  void setLevel(LogLevel level);

  void log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {}) const;
  void debug(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::kDebug, msg, fields);
  }
  void info(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::kInfo, msg, fields);
  }
  void warn(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::kWarn, msg, fields);
  }
  void error(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::kError, msg, fields);
  }
  bool enabled(LogLevel level) const;

  // Escapes `s` as the contents of a JSON string (no surrounding quotes). Invalid UTF-8 bytes
  // become U+FFFD, so a log line is always valid JSON whatever arrived from the network.
  static void appendJsonEscaped(std::string& out, std::string_view s);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::string component_;
  LogFields fields_;
};

}  // namespace kshard
