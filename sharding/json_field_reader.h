// JsonFieldReader: typed reads of a JSON object's fields, with errors that name the field path.
//
// Every codec that decodes outside input (the ShardMap resource, manager and peer API bodies,
// kshardctl's planning problems) needs the same checks: is it there, has it the right type, is it
// in range. The reader keeps the first error and returns a fallback value after it, so a decoder
// reads all its fields in a row and checks status() once:
//
//   JsonFieldReader r(json, "spec");
//   spec.shards = r.requiredInt("shards", 1, 100000);
//   spec.versionLabel = r.optionalString("versionLabel", spec.versionLabel);
//   if (!r.status().ok()) return r.status();   // "spec.shards: must be an integer"
//
// Unknown fields are ignored (Kubernetes style forward compatibility). A field whose value is null
// counts as absent.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kshard::sharding {

// nlohmann::json::parse with its exception turned into InvalidArgument:
// "invalid JSON: syntax error at byte 17: ...".
[[nodiscard]] StatusOr<nlohmann::json> parseJson(std::string_view text);

class JsonFieldReader {
 public:
  // `path` names `object` in messages ("spec", "status.pods[2]"); "" for the document root. When
  // `object` is not a JSON object, that is the first error.
  JsonFieldReader(const nlohmann::json& object, std::string path);

  // Present and not null.
  bool has(std::string_view key) const;

  std::int64_t requiredInt(std::string_view key, std::int64_t min, std::int64_t max);
  std::int64_t optionalInt(std::string_view key, std::int64_t fallback, std::int64_t min,
                           std::int64_t max);
  std::uint64_t optionalUint64(std::string_view key, std::uint64_t fallback);
  // Any JSON number (integer or not).
  double optionalNumber(std::string_view key, double fallback);
  bool optionalBool(std::string_view key, bool fallback);
  std::string requiredString(std::string_view key);
  std::string optionalString(std::string_view key, std::string fallback);
  // The array or object value, or nullptr when absent (or after a type error, which is recorded).
  const nlohmann::json* optionalArray(std::string_view key);
  const nlohmann::json* requiredArray(std::string_view key);
  const nlohmann::json* optionalObject(std::string_view key);

  // Records "<path>.<key>: <message>" unless an error is already recorded.
  void fail(std::string_view key, std::string_view message);
  // "<path>.<key>", or "<key>" at the root: for nested readers and messages.
  std::string pathOf(std::string_view key) const;
  // "<path>[<index>]": for the elements of an array field.
  static std::string elementPath(const std::string& arrayPath, std::size_t index);

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

 private:
  // The value of `key` when present and not null and no error is recorded yet.
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json* typed(std::string_view key, bool required, nlohmann::json::value_t type,
                              std::string_view typeName);

  const nlohmann::json& object_;
  std::string path_;
  Status status_;
};

}  // namespace kshard::sharding
