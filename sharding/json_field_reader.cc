#include "sharding/json_field_reader.h"

#include <limits>
#include <utility>

namespace kshard::sharding {

StatusOr<nlohmann::json> parseJson(std::string_view text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors are parse_error; a number too large for a double ("1E400") is out_of_range.
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    const std::size_t start = what.find("] ");
    if (start != std::string::npos) what.erase(0, start + 2);
    return invalidArgument("invalid JSON: " + what);
  }
}

JsonFieldReader::JsonFieldReader(const nlohmann::json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) {
    status_ = invalidArgument((path_.empty() ? std::string("document") : path_) +
                              ": must be a JSON object");
  }
}

std::string JsonFieldReader::pathOf(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  return path_ + "." + std::string(key);
}

std::string JsonFieldReader::elementPath(const std::string& arrayPath, std::size_t index) {
  return arrayPath + "[" + std::to_string(index) + "]";
}

void JsonFieldReader::fail(std::string_view key, std::string_view message) {
  if (status_.ok()) status_ = invalidArgument(pathOf(key) + ": " + std::string(message));
}

bool JsonFieldReader::has(std::string_view key) const {
  if (!object_.is_object()) return false;
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

const nlohmann::json* JsonFieldReader::find(std::string_view key) const {
  if (!status_.ok() || !has(key)) return nullptr;
  return &*object_.find(key);
}

const nlohmann::json* JsonFieldReader::typed(std::string_view key, bool required,
                                             nlohmann::json::value_t type,
                                             std::string_view typeName) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) {
    if (required && status_.ok()) fail(key, "is required");
    return nullptr;
  }
  if (v->type() != type) {
    fail(key, "must be " + std::string(typeName));
    return nullptr;
  }
  return v;
}

std::int64_t JsonFieldReader::requiredInt(std::string_view key, std::int64_t min,
                                          std::int64_t max) {
  if (status_.ok() && !has(key)) {
    fail(key, "is required");
    return min;
  }
  return optionalInt(key, min, min, max);
}

std::int64_t JsonFieldReader::optionalInt(std::string_view key, std::int64_t fallback,
                                          std::int64_t min, std::int64_t max) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) {
    fail(key, "must be an integer");
    return fallback;
  }
  // Integers above INT64_MAX arrive as unsigned; they are out of every range we accept.
  const bool huge = v->is_number_unsigned() &&
                    v->get<std::uint64_t>() >
                        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const std::int64_t value = huge ? 0 : v->get<std::int64_t>();
  if (huge || value < min || value > max) {
    fail(key, "must be in " + std::to_string(min) + ".." + std::to_string(max));
    return fallback;
  }
  return value;
}

std::uint64_t JsonFieldReader::optionalUint64(std::string_view key, std::uint64_t fallback) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number_unsigned()) {
    // nlohmann stores non-negative integer literals as unsigned; anything else is not one.
    fail(key, "must be a non-negative integer");
    return fallback;
  }
  return v->get<std::uint64_t>();
}

double JsonFieldReader::optionalNumber(std::string_view key, double fallback) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) {
    fail(key, "must be a number");
    return fallback;
  }
  return v->get<double>();
}

bool JsonFieldReader::optionalBool(std::string_view key, bool fallback) {
  const nlohmann::json* v = typed(key, false, nlohmann::json::value_t::boolean, "true or false");
  return v == nullptr ? fallback : v->get<bool>();
}

std::string JsonFieldReader::requiredString(std::string_view key) {
  const nlohmann::json* v = typed(key, true, nlohmann::json::value_t::string, "a string");
  return v == nullptr ? std::string() : v->get<std::string>();
}

std::string JsonFieldReader::optionalString(std::string_view key, std::string fallback) {
  const nlohmann::json* v = typed(key, false, nlohmann::json::value_t::string, "a string");
  return v == nullptr ? std::move(fallback) : v->get<std::string>();
}

const nlohmann::json* JsonFieldReader::optionalArray(std::string_view key) {
  return typed(key, false, nlohmann::json::value_t::array, "an array");
}

const nlohmann::json* JsonFieldReader::requiredArray(std::string_view key) {
  return typed(key, true, nlohmann::json::value_t::array, "an array");
}

const nlohmann::json* JsonFieldReader::optionalObject(std::string_view key) {
  return typed(key, false, nlohmann::json::value_t::object, "an object");
}

}  // namespace kshard::sharding
