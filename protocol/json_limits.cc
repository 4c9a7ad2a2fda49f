#include "protocol/json_limits.h"

#include <string>

namespace kshard::protocol {

Status checkJsonDepth(std::string_view text, std::size_t maxDepth) {
  std::size_t depth = 0;
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // nlohmann's parser stops at a NUL byte: the end of the input outside a string, an error
    // inside one. Nothing after it is parsed, so nothing after it counts.
    if (c == '\0') break;
    if (inString) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is, does not end the string
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth) {
        return invalidArgument("the JSON nests deeper than " + std::to_string(maxDepth) +
                               " levels (at byte " + std::to_string(i) + ")");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

}  // namespace kshard::protocol
