// OptionSet: the command line, environment and YAML configuration of a kshard binary, declared
// once per option.
//
//   OptionSet opts("kshard-sidecar", "Routes entity messages to the pod that owns them.");
//   opts.addAll({
//       {"shard-map", "KSHARD_SHARD_MAP", "ShardMap this pod belongs to.", &cfg.shardMap},
//       {"app-port", "KSHARD_APP_PORT", "Port of the app's entity callbacks.",
//        portOption(&cfg.appPort)},
//   });
//   auto r = opts.parse(argc, argv, env);
//
// Sources, lowest precedence first: the defaults (the targets' values before parse), the YAML file
// named by --config (a mapping of option names to scalars), environment variables, flags
// (`--name=value` or `--name value`; `--flag` alone sets a bool). Every error names its source and
// the option: "--app-port: must be an integer in 1..65535, got \"x\"",
// "config /etc/kshard/sidecar.yaml: app-port: ...", "env KSHARD_APP_PORT: ...".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

namespace kshard {

// Sets an option from its text form; InvalidArgument (without the option's name, which the
// caller adds) when the text is not acceptable.
using OptionSetter = std::function<Status(std::string_view value)>;

// The targets of an option table's rows (OptionSpec) besides text (std::string*) and booleans
// (bool*): an integer or a number within [min, max], and an option of a kind of its own, given
// the default --help shows and its setter.
struct IntOption {
  std::int64_t* target;
  std::int64_t min;
  std::int64_t max;
};
// A TCP port: an integer in 1..65535.
constexpr IntOption portOption(std::int64_t* target) { return {target, 1, 65535}; }
struct DoubleOption {
  double* target;
  double min;
  double max;
};
struct CustomOption {
  std::string defaultText;
  OptionSetter set;
};

// One row of an option table: the option's name (its flag and its YAML key), its environment
// variable ("" for none), its help, and where its value goes. The target's value before parse()
// is the default.
struct OptionSpec {
  std::string name;
  std::string env;
  std::string help;
  std::variant<std::string*, bool*, IntOption, DoubleOption, CustomOption> target;
};

class OptionSet {
 public:
  using Setter = OptionSetter;
  using Environment = std::function<std::optional<std::string>(const std::string& name)>;

  OptionSet(std::string program, std::string summary);

  // `env` may be empty (no environment variable). `defaultText` shows in --help.
  void add(std::string name, std::string env, std::string help, std::string defaultText,
           Setter set);
  void addString(std::string name, std::string env, std::string help, std::string* target);
  void addInt(std::string name, std::string env, std::string help, std::int64_t* target,
              std::int64_t min, std::int64_t max);
  void addBool(std::string name, std::string env, std::string help, bool* target);
  void addDouble(std::string name, std::string env, std::string help, double* target, double min,
                 double max);
  // Every row of `table`, in order, each as the add call its target calls for.
  void addAll(std::vector<OptionSpec> table);

  enum class Outcome { kRun, kHelp };
  // kHelp when --help or -h was given (print usage() and exit 0). Positional arguments are an
  // error. `env` defaults to the process environment.
  [[nodiscard]] StatusOr<Outcome> parse(int argc, const char* const* argv,
                                        const Environment& env = nullptr);
  std::string usage() const;
  const std::string& program() const { return program_; }

 private:
  struct Option {
    std::string name;
    std::string env;
    std::string help;
    std::string defaultText;
    Setter set;
    bool isBool = false;
  };
  const Option* find(std::string_view name) const;
  Status loadYaml(const std::string& path);

  std::string program_;
  std::string summary_;
  std::vector<Option> options_;
};

}  // namespace kshard
