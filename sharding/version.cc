#include "sharding/version.h"

#include <algorithm>
#include <cstddef>

namespace kshard::sharding {
namespace {

bool isSeparator(char c) { return c == '.' || c == '-'; }

bool isNumber(std::string_view part) {
  return !part.empty() &&
         std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Rank of a part's kind: empty < number < text.
int kindRank(std::string_view part) {
  if (part.empty()) return 0;
  return isNumber(part) ? 1 : 2;
}

int sign(int v) { return (v > 0) - (v < 0); }

// Compares two digit strings by value, whatever their length.
int compareNumbers(std::string_view a, std::string_view b) {
  a.remove_prefix(std::min(a.find_first_not_of('0'), a.size()));
  b.remove_prefix(std::min(b.find_first_not_of('0'), b.size()));
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return sign(a.compare(b));
}

int compareParts(std::string_view a, std::string_view b) {
  const int ra = kindRank(a);
  const int rb = kindRank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (ra == 1) return compareNumbers(a, b);
  // std::string_view::compare uses char_traits<char>, which compares as unsigned char.
  return sign(a.compare(b));
}

// Yields the parts of a version one at a time, without allocating.
class PartCursor {
 public:
  explicit PartCursor(std::string_view v) : rest_(v), done_(v.empty()) {}

  bool done() const { return done_; }

  std::string_view next() {
    const std::size_t end = std::find_if(rest_.begin(), rest_.end(), isSeparator) - rest_.begin();
    const std::string_view part = rest_.substr(0, end);
    if (end == rest_.size()) {
      done_ = true;
    } else {
      rest_.remove_prefix(end + 1);
    }
    return part;
  }

 private:
  std::string_view rest_;
  bool done_;
};

}  // namespace

int compareVersions(std::string_view a, std::string_view b) {
  PartCursor pa(a);
  PartCursor pb(b);
  while (!pa.done() && !pb.done()) {
    const int c = compareParts(pa.next(), pb.next());
    if (c != 0) return c;
  }
  if (pa.done() != pb.done()) return pa.done() ? -1 : 1;
  return sign(a.compare(b));
}

}  // namespace kshard::sharding
