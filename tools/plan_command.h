// `kshardctl plan`: reads a planning problem (JSON) on stdin, prints the planner's decision.
#pragma once

#include "tools/command.h"

namespace kshard::tools {

const Command& planCommand();

}  // namespace kshard::tools
