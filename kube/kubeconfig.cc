// The kubeconfig loader: the only place yaml-cpp is used.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kube/config.h"

namespace kshard::kube {
namespace {

// Where a kubeconfig entry came from, so an error can name the file and the field.
struct Origin {
  std::string file;
  std::string field;  // "users[0].user"
};

struct Entry {
  YAML::Node body;  // the "cluster", "user" or "context" map
  Origin origin;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string currentContext;
  std::string currentContextFile;
  std::vector<std::string> files;
};

Status fieldError(const std::string& file, const std::string& field, const std::string& what) {
  return invalidArgument("kubeconfig " + file + ": " + field + ": " + what);
}

// Reads an optional scalar string field; an absent or null field gives "".
Status scalarField(const YAML::Node& map, const char* key, const Origin& o, std::string& out) {
  out.clear();
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return {};
  if (!n.IsScalar()) return fieldError(o.file, o.field + "." + key, "must be a string");
  out = n.Scalar();
  return {};
}

Status boolField(const YAML::Node& map, const char* key, const Origin& o, bool& out) {
  out = false;
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return {};
  const std::string v = n.IsScalar() ? n.Scalar() : "";
  if (v == "true" || v == "True" || v == "TRUE") {
    out = true;
  } else if (v != "false" && v != "False" && v != "FALSE") {
    return fieldError(o.file, o.field + "." + key, "must be true or false");
  }
  return {};
}

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding, as Go's encoding/base64 (which skips '\r' and '\n').
bool decodeBase64(const std::string& in, std::string& out) {
  std::string clean;
  clean.reserve(in.size());
  for (char c : in) {
    if (c != '\n' && c != '\r') clean += c;
  }
  if (clean.size() % 4 != 0) return false;
  out.clear();
  for (std::size_t i = 0; i < clean.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = clean[i + k];
      if (c == '=') {
        // Padding only in the last quantum, in its last two places.
        if (i + 4 != clean.size() || k < 2) return false;
        v[k] = 0;
        ++pad;
      } else {
        if (pad > 0) return false;
        v[k] = base64Value(c);
        if (v[k] < 0) return false;
      }
    }
    const unsigned triple = (static_cast<unsigned>(v[0]) << 18) |
                            (static_cast<unsigned>(v[1]) << 12) |
                            (static_cast<unsigned>(v[2]) << 6) | static_cast<unsigned>(v[3]);
    out += static_cast<char>((triple >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((triple >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(triple & 0xFF);
  }
  return true;
}

// A "<name>-data" field (base64 PEM) or a "<name>" file path, at most one of them.
Status pemField(const YAML::Node& map, const std::string& key, const Origin& o,
                std::string& dataOut, std::string& fileOut) {
  std::string data, file;
  if (Status s = scalarField(map, (key + "-data").c_str(), o, data); !s.ok()) return s;
  if (Status s = scalarField(map, key.c_str(), o, file); !s.ok()) return s;
  if (!data.empty() && !file.empty()) {
    return fieldError(o.file, o.field, "both " + key + " and " + key + "-data are set; use one");
  }
  if (!data.empty()) {
    std::string decoded;
    if (!decodeBase64(data, decoded)) {
      return fieldError(o.file, o.field + "." + key + "-data", "not valid base64");
    }
    if (decoded.find("-----BEGIN ") == std::string::npos) {
      return fieldError(o.file, o.field + "." + key + "-data", "decoded data is not PEM");
    }
    dataOut = std::move(decoded);
  }
  if (!file.empty()) {
    std::filesystem::path p(file);
    if (p.is_relative()) p = std::filesystem::path(o.file).parent_path() / p;
    fileOut = p.lexically_normal().string();
    if (auto content = readFile(fileOut); !content.ok()) {
      return fieldError(o.file, o.field + "." + key, content.status().message());
    }
  }
  return {};
}

// Adds the named entries of one list ("clusters", "users", "contexts"); first definition wins.
Status mergeList(const YAML::Node& root, const char* list, const char* bodyKey,
                 const std::string& file, std::map<std::string, Entry>& into) {
  const YAML::Node seq = root[list];
  if (!seq || seq.IsNull()) return {};
  if (!seq.IsSequence()) return fieldError(file, list, "must be a list");
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string field = std::string(list) + "[" + std::to_string(i) + "]";
    const YAML::Node item = seq[i];
    if (!item.IsMap())
      return fieldError(file, field, "must be a map with name and " + std::string(bodyKey));
    std::string name;
    if (Status s = scalarField(item, "name", {file, field}, name); !s.ok()) return s;
    if (name.empty()) return fieldError(file, field + ".name", "missing");
    const YAML::Node body = item[bodyKey];
    if (!body || !body.IsMap()) {
      return fieldError(file, field + "." + bodyKey, "missing or not a map");
    }
    into.try_emplace(name, Entry{body, Origin{file, field + "." + bodyKey}});
  }
  return {};
}

Status mergeFile(const std::string& text, const std::string& file, Merged& m) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return invalidArgument("kubeconfig " + file + ": not valid YAML at line " +
                           std::to_string(e.mark.line + 1) + ", column " +
                           std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  m.files.push_back(file);
  if (!root || root.IsNull()) return {};
  if (!root.IsMap())
    return invalidArgument("kubeconfig " + file + ": not a kubeconfig (expected a map)");
  if (Status s = mergeList(root, "clusters", "cluster", file, m.clusters); !s.ok()) return s;
  if (Status s = mergeList(root, "users", "user", file, m.users); !s.ok()) return s;
  if (Status s = mergeList(root, "contexts", "context", file, m.contexts); !s.ok()) return s;
  std::string current;
  if (Status s = scalarField(root, "current-context", {file, ""}, current); !s.ok()) {
    return fieldError(file, "current-context", "must be a string");
  }
  if (m.currentContext.empty() && !current.empty()) {
    m.currentContext = current;
    m.currentContextFile = file;
  }
  return {};
}

std::string names(const std::map<std::string, Entry>& entries) {
  std::string out;
  for (const auto& [name, e] : entries) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out.empty() ? "none" : out;
}

Status applyCluster(const Entry& e, Config& c) {
  const Origin& o = e.origin;
  std::string server;
  if (Status s = scalarField(e.body, "server", o, server); !s.ok()) return s;
  if (server.empty()) return fieldError(o.file, o.field + ".server", "missing");
  if (Status s = parseServerUrl(server, c); !s.ok()) {
    return fieldError(o.file, o.field + ".server", s.message());
  }
  if (Status s = pemField(e.body, "certificate-authority", o, c.tls.caData, c.tls.caFile);
      !s.ok()) {
    return s;
  }
  if (Status s = boolField(e.body, "insecure-skip-tls-verify", o, c.tls.insecureSkipVerify);
      !s.ok()) {
    return s;
  }
  if (c.tls.insecureSkipVerify && (!c.tls.caData.empty() || !c.tls.caFile.empty())) {
    return fieldError(o.file, o.field,
                      "insecure-skip-tls-verify cannot be combined with a certificate authority");
  }
  if (Status s = scalarField(e.body, "tls-server-name", o, c.tls.serverName); !s.ok()) return s;
  if (e.body["proxy-url"]) {
    return fieldError(o.file, o.field + ".proxy-url", "proxies are not supported");
  }
  return {};
}

Status applyUser(const Entry& e, const Clock& clock, Config& c) {
  const Origin& o = e.origin;
  for (const char* unsupported : {"exec", "auth-provider", "username", "password", "as"}) {
    if (e.body[unsupported]) {
      return fieldError(o.file, o.field + "." + unsupported,
                        "not supported by kshard (use a client certificate or a token)");
    }
  }
  if (Status s = pemField(e.body, "client-certificate", o, c.tls.certData, c.tls.certFile);
      !s.ok()) {
    return s;
  }
  if (Status s = pemField(e.body, "client-key", o, c.tls.keyData, c.tls.keyFile); !s.ok()) {
    return s;
  }
  const bool haveCert = !c.tls.certData.empty() || !c.tls.certFile.empty();
  const bool haveKey = !c.tls.keyData.empty() || !c.tls.keyFile.empty();
  if (haveCert != haveKey) {
    return fieldError(o.file, o.field,
                      haveCert ? "client-certificate without client-key"
                               : "client-key without client-certificate");
  }
  std::string token, tokenFile;
  if (Status s = scalarField(e.body, "token", o, token); !s.ok()) return s;
  if (Status s = scalarField(e.body, "tokenFile", o, tokenFile); !s.ok()) return s;
  if (!tokenFile.empty()) {
    // The file wins over an inline token: it can rotate.
    std::filesystem::path p(tokenFile);
    if (p.is_relative()) p = std::filesystem::path(o.file).parent_path() / p;
    auto source = std::make_shared<FileTokenSource>(p.lexically_normal().string(), clock);
    if (auto t = source->token(); !t.ok()) {
      return fieldError(o.file, o.field + ".tokenFile", t.status().message());
    }
    c.token = std::move(source);
  } else if (!token.empty()) {
    c.token = std::make_shared<StaticTokenSource>(token);
  }
  return {};
}

StatusOr<Config> resolve(const Merged& m, const std::string& contextOverride, const Clock& clock) {
  const std::string where = m.files.size() == 1 ? m.files.front() : m.currentContextFile;
  const std::string contextName = contextOverride.empty() ? m.currentContext : contextOverride;
  if (contextName.empty()) {
    return invalidArgument("kubeconfig " + (m.files.empty() ? std::string("?") : m.files.front()) +
                           ": current-context is not set and no context was given (contexts: " +
                           names(m.contexts) + ")");
  }
  auto ctx = m.contexts.find(contextName);
  if (ctx == m.contexts.end()) {
    return invalidArgument("kubeconfig " + (where.empty() ? m.files.front() : where) +
                           ": context \"" + contextName +
                           "\" not found (contexts: " + names(m.contexts) + ")");
  }
  const Origin& co = ctx->second.origin;
  std::string clusterName, userName, ns;
  if (Status s = scalarField(ctx->second.body, "cluster", co, clusterName); !s.ok()) return s;
  if (Status s = scalarField(ctx->second.body, "user", co, userName); !s.ok()) return s;
  if (Status s = scalarField(ctx->second.body, "namespace", co, ns); !s.ok()) return s;
  if (clusterName.empty()) return fieldError(co.file, co.field + ".cluster", "missing");

  Config c;
  c.source = "kubeconfig " + co.file + ", context " + contextName;
  if (!ns.empty()) c.defaultNamespace = ns;
  auto cluster = m.clusters.find(clusterName);
  if (cluster == m.clusters.end()) {
    return fieldError(
        co.file, co.field + ".cluster",
        "no cluster named \"" + clusterName + "\" (clusters: " + names(m.clusters) + ")");
  }
  if (Status s = applyCluster(cluster->second, c); !s.ok()) return s;
  if (!userName.empty()) {
    auto user = m.users.find(userName);
    if (user == m.users.end()) {
      return fieldError(co.file, co.field + ".user",
                        "no user named \"" + userName + "\" (users: " + names(m.users) + ")");
    }
    if (Status s = applyUser(user->second, clock, c); !s.ok()) return s;
  }
  return c;
}

}  // namespace

StatusOr<Config> parseKubeconfig(const std::string& text, const std::string& path,
                                 const std::string& context, const Clock& clock) {
  Merged m;
  if (Status s = mergeFile(text, path, m); !s.ok()) return s;
  return resolve(m, context, clock);
}

StatusOr<Config> kubeconfigConfig(const std::vector<std::string>& paths, const std::string& context,
                                  const Clock& clock) {
  Merged m;
  for (const auto& path : paths) {
    auto text = readFile(path);
    if (!text.ok()) return text.status().withContext("kubeconfig");
    if (Status s = mergeFile(*text, path, m); !s.ok()) return s;
  }
  return resolve(m, context, clock);
}

}  // namespace kshard::kube
