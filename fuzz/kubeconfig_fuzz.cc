// kubeconfig files (kube/config.h, parseKubeconfig): YAML a user hands to the operator or the
// sidecar with --kubeconfig.
//
// Checks: no input throws or crashes, errors name the file; an accepted config has an http(s)
// base URL without a trailing slash in its path prefix, a client certificate exactly when it has
// a key, no CA together with insecure-skip-tls-verify, and a namespace.
//
// The loader reads the files a kubeconfig names (certificate-authority, tokenFile, ...), relative
// to the kubeconfig's directory, which here does not exist. Inputs that name a device, a FIFO, a
// directory or a large file (/dev/zero, ../../dev/stdin) are skipped: reading those would block
// or take all memory, which says nothing about the parser.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "base/clock.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "kube/config.h"

namespace kshard::fuzz {
namespace {

constexpr char kPath[] = "/nonexistent-kshard-fuzz/config/kubeconfig";

bool harmlessPath(const std::string& value) {
  std::filesystem::path p(value.c_str());  // the loader opens c_str(): a NUL ends the path
  if (p.is_relative()) p = std::filesystem::path(kPath).parent_path() / p;
  std::error_code ec;
  const auto st = std::filesystem::status(p.lexically_normal(), ec);
  if (ec || !std::filesystem::exists(st)) return true;
  if (!std::filesystem::is_regular_file(st)) return false;
  const auto bytes = std::filesystem::file_size(p.lexically_normal(), ec);
  return !ec && bytes <= (1u << 20);
}

// False when some scalar names a file the loader should not be made to read. `budget` bounds the
// walk over documents whose aliases repeat nodes.
bool harmlessScalars(const YAML::Node& node, int depth, int& budget) {
  if (--budget < 0 || depth > 64) return false;
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return harmlessPath(node.Scalar());
    case YAML::NodeType::Sequence:
      for (const auto& item : node) {
        if (!harmlessScalars(item, depth + 1, budget)) return false;
      }
      return true;
    case YAML::NodeType::Map:
      for (const auto& kv : node) {
        if (!harmlessScalars(kv.first, depth + 1, budget) ||
            !harmlessScalars(kv.second, depth + 1, budget)) {
          return false;
        }
      }
      return true;
    default:
      return true;
  }
}

bool harmless(const std::string& text) {
  try {
    int budget = 20000;
    return harmlessScalars(YAML::Load(text), 0, budget);
  } catch (const YAML::Exception&) {
    return true;  // the loader reports the same syntax error without reading anything
  }
}

}  // namespace

int fuzzOneKubeconfig(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const std::string context(in.until('\n'));
  const std::string text(in.rest());
  if (!harmless(text)) return 0;

  ManualClock clock;
  const StatusOr<kube::Config> config = kube::parseKubeconfig(text, kPath, context, clock);
  if (!config.ok()) {
    check(config.status().message().find(kPath) != std::string::npos,
          "a kubeconfig error names the file", config.status().message());
    return 0;
  }
  const kube::Config& c = *config;
  check(c.baseUrl.starts_with("https://") || c.baseUrl.starts_with("http://"),
        "the server is an http(s) URL", c.baseUrl);
  check(c.baseUrl.find('/', c.baseUrl.find("://") + 3) == std::string::npos,
        "the base URL has no path", c.baseUrl);
  check(c.pathPrefix.empty() || (c.pathPrefix.front() == '/' && c.pathPrefix.back() != '/'),
        "the path prefix starts with '/' and does not end with one", c.pathPrefix);
  const bool cert = !c.tls.certData.empty() || !c.tls.certFile.empty();
  const bool key = !c.tls.keyData.empty() || !c.tls.keyFile.empty();
  check(cert == key, "a client certificate comes with its key", text);
  check(!c.tls.insecureSkipVerify || (c.tls.caData.empty() && c.tls.caFile.empty()),
        "insecure-skip-tls-verify excludes a CA", text);
  check(!c.defaultNamespace.empty(), "there is always a namespace", text);
  if (c.token) {
    const auto token = c.token->token();
    check(token.ok(), "a configured token can be read", text);
  }
  return 0;
}

}  // namespace kshard::fuzz
