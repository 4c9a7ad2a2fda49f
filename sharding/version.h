// Version ordering: which pods run the newest version of the app.
//
// The planner gives shards only to pods of the newest version and stops balancing while pods run
// different versions (a rolling update), so it needs a total order on version labels. Versions are
// split into parts on '.' and '-'; parts compare in order, numerically where both are numbers
// ("1.10.0" > "1.9.2"). The rest of the order is defined so that it is total and consistent:
//
//   - Part kinds rank: empty part < number < text ("1..2" < "1.0.2" < "1.a.2"). A number is a
//     non-empty run of ASCII digits of any length (no overflow); text compares byte by byte.
//   - Numbers compare by value, so leading zeros do not matter at this stage ("1.02" ~ "1.2").
//   - When one list of parts is a prefix of the other, the longer list is newer:
//     "1.0" < "1.0.0" < "1.0.0-1" < "1.0.0-rc1". (This is not SemVer's pre-release rule; labels
//     are free-form, and "a suffix means a later build" is the Shardcake / Debian reading.)
//   - The empty string has no parts and is older than every other version.
//   - Versions whose parts are all equivalent ("1.02" vs "1.2", "1.2" vs "1-2") are ordered by
//     their bytes, so compareVersions(a, b) == 0 exactly when a == b.
#pragma once

#include <string_view>

namespace kshard::sharding {

// <0 when a is older than b, 0 when a == b, >0 when a is newer. A strict total order.
int compareVersions(std::string_view a, std::string_view b);

// For ordered containers and std::max_element.
struct VersionLess {
  bool operator()(std::string_view a, std::string_view b) const {
    return compareVersions(a, b) < 0;
  }
};

}  // namespace kshard::sharding
