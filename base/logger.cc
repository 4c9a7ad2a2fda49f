#include "base/logger.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <utility>

#include "base/enum_names.h"
#include "base/utf8.h"

namespace kshard {

struct Logger::Shared {
  std::atomic<int> minLevel;
  LogSink sink;
  const Clock* clock;
};

namespace {

constexpr std::pair<LogLevel, std::string_view> kLogLevelNames[] = {{LogLevel::kDebug, "debug"},
                                                                    {LogLevel::kInfo, "info"},
                                                                    {LogLevel::kWarn, "warn"},
                                                                    {LogLevel::kError, "error"}};

void writeStderr(std::string_view line) {
  // One write(2) per line keeps lines from different threads and processes whole.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void appendTimestamp(std::string& out, WallTime t) {
  const auto sinceEpoch = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(sinceEpoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(sinceEpoch - secs);
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis.count()));
  out += buf;
}

void appendValue(std::string& out, const LogValue& value) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out += '"';
          Logger::appendJsonEscaped(out, v);
          out += '"';
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          if (!std::isfinite(v)) {
            out += "null";
          } else {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.17g", v);
            out += buf;
          }
        } else {
          out += std::to_string(v);
        }
      },
      value.get());
}

void appendField(std::string& out, const std::string& key, const LogValue& value) {
  out += ",\"";
  Logger::appendJsonEscaped(out, key);
  out += "\":";
  appendValue(out, value);
}

}  // namespace

std::string_view logLevelName(LogLevel level) { return nameIn(kLogLevelNames, level, "info"); }

bool parseLogLevel(std::string_view text, LogLevel& out) {
  const std::optional<LogLevel> level = valueIn(kLogLevelNames, text == "warning" ? "warn" : text);
  if (level) out = *level;
  return level.has_value();
}

Logger::Logger(std::string component, LogLevel minLevel)
    : Logger(std::move(component), minLevel, writeStderr) {}

Logger::Logger(std::string component, LogLevel minLevel, LogSink sink, const Clock& clock)
    : shared_(std::make_shared<Shared>()), component_(std::move(component)) {
  shared_->minLevel = static_cast<int>(minLevel);
  shared_->sink = std::move(sink);
  shared_->clock = &clock;
}

Logger Logger::withFields(LogFields fields) const {
  Logger child = *this;
  for (auto& f : fields) child.fields_.push_back(std::move(f));
  return child;
}

void Logger::setLevel(LogLevel level) { shared_->minLevel = static_cast<int>(level); }

bool Logger::enabled(LogLevel level) const {
  return static_cast<int>(level) >= shared_->minLevel.load(std::memory_order_relaxed);
}

void Logger::log(LogLevel level, std::string_view msg,
                 std::initializer_list<LogField> fields) const {
  if (!enabled(level)) return;
  std::string line;
  line.reserve(160);
  line += "{\"ts\":\"";
  appendTimestamp(line, shared_->clock->wallNow());
  line += "\",\"level\":\"";
  line += logLevelName(level);
  line += "\",\"component\":\"";
  appendJsonEscaped(line, component_);
  line += "\",\"msg\":\"";
  appendJsonEscaped(line, msg);
  line += '"';
  for (const auto& [k, v] : fields_) appendField(line, k, v);
  for (const auto& [k, v] : fields) appendField(line, k, v);
  line += "}\n";
  shared_->sink(line);
}

void Logger::appendJsonEscaped(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t len = utf8SequenceLength(s.substr(i));
      if (len == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
}

}  // namespace kshard
