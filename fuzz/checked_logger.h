// A Logger for harnesses whose sink checks every line instead of printing it: each must be one
// valid JSON object in valid UTF-8, whatever bytes the input put into its fields.
#pragma once

#include <string>

#include "base/logger.h"

namespace kshard::fuzz {

Logger checkedLogger(std::string component);

}  // namespace kshard::fuzz
