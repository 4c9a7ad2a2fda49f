#include "base/options.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <type_traits>
#include <variant>

namespace kshard {
namespace {

Status withSource(const Status& s, const std::string& source) {
  return s.ok() ? s : Status(s.code(), source + ": " + s.message());
}

std::optional<std::string> processEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace

OptionSet::OptionSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  add("config", "", "YAML file of option values (keys are the option names).", "", nullptr);
}

void OptionSet::add(std::string name, std::string env, std::string help, std::string defaultText,
                    Setter set) {
  options_.push_back({std::move(name), std::move(env), std::move(help), std::move(defaultText),
                      std::move(set), false});
}

void OptionSet::addString(std::string name, std::string env, std::string help,
                          std::string* target) {
  add(std::move(name), std::move(env), std::move(help), *target, [target](std::string_view v) {
    *target = std::string(v);
    return Status{};
  });
}

void OptionSet::addInt(std::string name, std::string env, std::string help, std::int64_t* target,
                       std::int64_t min, std::int64_t max) {
  add(std::move(name), std::move(env), std::move(help), std::to_string(*target),
      [target, min, max](std::string_view v) {
        std::int64_t n = 0;
        auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec != std::errc() || ptr != v.data() + v.size() || n < min || n > max) {
          return invalidArgument("must be an integer in " + std::to_string(min) + ".." +
                                 std::to_string(max) + ", got \"" + std::string(v) + "\"");
        }
        *target = n;
        return Status{};
      });
}

void OptionSet::addBool(std::string name, std::string env, std::string help, bool* target) {
  add(std::move(name), std::move(env), std::move(help), *target ? "true" : "false",
      [target](std::string_view v) {
        if (v == "true" || v == "1" || v == "yes") {
          *target = true;
        } else if (v == "false" || v == "0" || v == "no") {
          *target = false;
        } else {
          return invalidArgument("must be true or false, got \"" + std::string(v) + "\"");
        }
        return Status{};
      });
  options_.back().isBool = true;
}

void OptionSet::addDouble(std::string name, std::string env, std::string help, double* target,
                          double min, double max) {
  std::ostringstream def;
  def << *target;
  add(std::move(name), std::move(env), std::move(help), def.str(),
      [target, min, max](std::string_view v) {
        char* end = nullptr;
        const std::string s(v);
        const double d = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d) || d < min || d > max) {
          std::ostringstream m;
          m << "must be a number in " << min << ".." << max << ", got \"" << s << "\"";
          return invalidArgument(m.str());
        }
        *target = d;
        return Status{};
      });
}

void OptionSet::addAll(std::vector<OptionSpec> table) {
  for (OptionSpec& row : table) {
    std::visit(
        [&](auto&& target) {
          using T = std::decay_t<decltype(target)>;
          if constexpr (std::is_same_v<T, std::string*>) {
            addString(std::move(row.name), std::move(row.env), std::move(row.help), target);
          } else if constexpr (std::is_same_v<T, bool*>) {
            addBool(std::move(row.name), std::move(row.env), std::move(row.help), target);
          } else if constexpr (std::is_same_v<T, IntOption>) {
            addInt(std::move(row.name), std::move(row.env), std::move(row.help), target.target,
                   target.min, target.max);
          } else if constexpr (std::is_same_v<T, DoubleOption>) {
            addDouble(std::move(row.name), std::move(row.env), std::move(row.help), target.target,
                      target.min, target.max);
          } else {
            add(std::move(row.name), std::move(row.env), std::move(row.help),
                std::move(target.defaultText), std::move(target.set));
          }
        },
        row.target);
  }
}

const OptionSet::Option* OptionSet::find(std::string_view name) const {
  for (const auto& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

Status OptionSet::loadYaml(const std::string& path) {
  const std::string source = "config " + path;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return invalidArgument(source + ": cannot be read");
  } catch (const YAML::Exception& e) {
    return invalidArgument(source + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) return invalidArgument(source + ": must be a mapping of option names");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    const Option* o = find(key);
    if (o == nullptr || o->name == "config") {
      return invalidArgument(source + ": unknown option \"" + key + "\"");
    }
    if (!kv.second.IsScalar()) return invalidArgument(source + ": " + key + ": must be a scalar");
    if (Status s = o->set(kv.second.Scalar()); !s.ok()) return withSource(s, source + ": " + key);
  }
  return {};
}

StatusOr<OptionSet::Outcome> OptionSet::parse(int argc, const char* const* argv,
                                              const Environment& env) {
  struct FlagValue {
    const Option* option;
    std::string value;
  };
  std::vector<FlagValue> flags;
  std::string configPath;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return Outcome::kHelp;
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      return invalidArgument("unexpected argument \"" + std::string(arg) + "\" (see --help)");
    }
    arg.remove_prefix(2);
    std::string value;
    bool hasValue = false;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    const Option* o = find(arg);
    if (o == nullptr) {
      return invalidArgument("unknown flag --" + std::string(arg) + " (see --help)");
    }
    if (!hasValue) {
      if (o->isBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return invalidArgument("--" + o->name + ": needs a value");
      }
    }
    if (o->name == "config") {
      configPath = value;
    } else {
      flags.push_back({o, value});
    }
  }
  if (!configPath.empty()) {
    if (Status s = loadYaml(configPath); !s.ok()) return s;
  }
  const Environment& lookup = env ? env : Environment(processEnv);
  for (const auto& o : options_) {
    if (o.env.empty() || !o.set) continue;
    if (auto v = lookup(o.env); v) {
      if (Status s = o.set(*v); !s.ok()) return withSource(s, "env " + o.env);
    }
  }
  for (const auto& f : flags) {
    if (Status s = f.option->set(f.value); !s.ok()) return withSource(s, "--" + f.option->name);
  }
  return Outcome::kRun;
}

std::string OptionSet::usage() const {
  std::ostringstream out;
  out << "Usage: " << program_ << " [flags]\n\n" << summary_ << "\n\nFlags (env, default):\n";
  for (const auto& o : options_) {
    out << "  --" << o.name;
    if (!o.env.empty() || !o.defaultText.empty()) {
      out << " (";
      if (!o.env.empty()) out << "$" << o.env;
      if (!o.env.empty() && !o.defaultText.empty()) out << ", ";
      if (!o.defaultText.empty()) out << "default " << o.defaultText;
      out << ")";
    }
    out << "\n      " << o.help << "\n";
  }
  out << "\nPrecedence: flags over environment over the --config file over defaults.\n";
  return out.str();
}

}  // namespace kshard
