// kshardctl doctor: checks a kshard installation from inside or outside the cluster (the chart's
// `helm test` runs it).
#pragma once

#include "tools/command.h"

namespace kshard::tools {

const Command& doctorCommand();

}  // namespace kshard::tools
