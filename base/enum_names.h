// The names of an enum's values, kept in one table per enum: the name of a value, and the value
// of a name. A table is a constexpr array of {value, name} pairs:
//
//   constexpr std::pair<Color, std::string_view> kColorNames[] = {
//       {Color::kRed, "red"}, {Color::kGreen, "green"}};
//   nameIn(kColorNames, Color::kRed, "?")  // "red"
//   valueIn(kColorNames, "green")          // Color::kGreen
//
// A linear scan: the tables are short, and the scan reads as the table does.
#pragma once

#include <iterator>
#include <optional>
#include <string_view>
#include <type_traits>

namespace kshard {

// The name of `value` in `table`; `unknown` when the table does not list it.
template <typename Table, typename Enum>
constexpr std::string_view nameIn(const Table& table, Enum value, std::string_view unknown) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return unknown;
}

// The value named `name` in `table` (names compare exactly); nullopt when none is.
template <typename Table>
constexpr auto valueIn(const Table& table, std::string_view name)
    -> std::optional<std::remove_cvref_t<decltype(std::begin(table)->first)>> {
  for (const auto& [value, n] : table) {
    if (n == name) return value;
  }
  return std::nullopt;
}

}  // namespace kshard
