// Version labels of pods (sharding/version.h), which decide who gets shards during a rolling
// update. The order must be a strict total order whatever the labels hold, or the planner's
// sorting and "newest version" choice would depend on the order pods registered in.
//
// Checks on three labels from the input: compare(a, a) == 0; compare(a, b) == 0 only when a == b;
// sign(compare(a, b)) == -sign(compare(b, a)); a < b and b < c imply a < c.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "sharding/version.h"

namespace kshard::fuzz {
namespace {

int sign(int v) { return (v > 0) - (v < 0); }

}  // namespace

int fuzzOneVersion(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const std::string a(in.until('\n'));
  const std::string b(in.until('\n'));
  const std::string c(in.rest());
  const std::string all = a + " | " + b + " | " + c;
  using sharding::compareVersions;
  for (const std::string* v : {&a, &b, &c}) {
    check(compareVersions(*v, *v) == 0, "compare(a, a) == 0", *v);
  }
  const std::pair<const std::string*, const std::string*> pairs[] = {{&a, &b}, {&b, &c}, {&a, &c}};
  for (const auto& [x, y] : pairs) {
    const int xy = compareVersions(*x, *y);
    check((xy == 0) == (*x == *y), "compare(a, b) == 0 exactly when a == b", all);
    check(sign(xy) == -sign(compareVersions(*y, *x)), "compare is antisymmetric", all);
  }
  const std::string* v[] = {&a, &b, &c};
  std::sort(std::begin(v), std::end(v),
            [](const std::string* x, const std::string* y) { return compareVersions(*x, *y) < 0; });
  check(compareVersions(*v[0], *v[1]) <= 0 && compareVersions(*v[1], *v[2]) <= 0 &&
            compareVersions(*v[0], *v[2]) <= 0,
        "compare is transitive", all);
  return 0;
}

}  // namespace kshard::fuzz
