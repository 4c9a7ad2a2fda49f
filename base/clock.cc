#include "base/clock.h"

namespace kshard {

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace kshard
