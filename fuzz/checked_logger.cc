#include "fuzz/checked_logger.h"

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_input.h"

namespace kshard::fuzz {

Logger checkedLogger(std::string component) {
  return Logger(std::move(component), LogLevel::kDebug, [](std::string_view line) {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    check(line.find('\n') == std::string_view::npos, "a log entry is one line", line);
    check(referenceIsUtf8(line), "a log line is valid UTF-8", line);
    const auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    check(!parsed.is_discarded() && parsed.is_object(), "a log line is a JSON object", line);
  });
}

}  // namespace kshard::fuzz
