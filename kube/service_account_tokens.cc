#include "kube/service_account_tokens.h"

#include <map>
#include <mutex>
#include <vector>

#include "kube/api_request.h"
#include "kube/api_time.h"
#include "kube/resource.h"

namespace kshard::kube {

using nlohmann::json;

namespace {

struct Minted {
  std::string token;
  WallTime expiresAt;
};

// The token and its expiry from a TokenRequest answer; `askedAt` + the lifetime asked for when the
// answer has no expirationTimestamp.
StatusOr<Minted> mintedFrom(const json& answer, WallTime askedAt, Duration lifetime) {
  const json status = answer.is_object() ? answer.value("status", json::object()) : json();
  if (!status.is_object() || !status.contains("token") || !status["token"].is_string() ||
      status["token"].get<std::string>().empty()) {
    return internalError("the TokenRequest answer has no status.token");
  }
  Minted m{status["token"].get<std::string>(),
           askedAt + std::chrono::duration_cast<WallTime::duration>(lifetime)};
  if (auto at = status.find("expirationTimestamp"); at != status.end() && at->is_string()) {
    auto parsed = parseTime(at->get<std::string>());
    if (!parsed.ok()) return parsed.status().withContext("status.expirationTimestamp");
    m.expiresAt = *parsed;
  }
  return m;
}

}  // namespace

json tokenRequestObject(const std::string& audience, Duration lifetime) {
  return {{"apiVersion", "authentication.k8s.io/v1"},
          {"kind", "TokenRequest"},
          {"spec",
           {{"audiences", json::array({audience})},
            {"expirationSeconds",
             std::chrono::duration_cast<std::chrono::seconds>(lifetime).count()}}}};
}

struct ServiceAccountTokens::State {
  struct Entry {
    std::string token;
    WallTime expiresAt{};
    WallTime renewAt{};  // half way through the granted lifetime
    bool minting = false;
    std::vector<Callback> waiters;
  };

  State(const Clock& c, ServiceAccountTokensOptions o) : clock(c), options(std::move(o)) {}

  // Room for one more audience: expired entries go first, then all that nobody waits for.
  void makeRoomLocked(WallTime now) {
    if (entries.size() < options.maxAudiences) return;
    std::erase_if(entries,
                  [now](const auto& e) { return !e.second.minting && e.second.expiresAt <= now; });
    if (entries.size() < options.maxAudiences) return;
    std::erase_if(entries, [](const auto& e) { return !e.second.minting; });
  }

  // Hands the outcome of a TokenRequest for `audience` to its waiters.
  void finish(const std::string& audience, StatusOr<Minted> result, WallTime askedAt) {
    std::vector<Callback> waiters;
    StatusOr<std::string> answer{std::string()};
    {
      std::lock_guard lock(mu);
      Entry& e = entries[audience];
      e.minting = false;
      waiters.swap(e.waiters);
      if (result.ok()) {
        e.token = std::move(result->token);
        e.expiresAt = result->expiresAt;
        e.renewAt = askedAt + (e.expiresAt - askedAt) / 2;
        answer = e.token;
      } else if (!e.token.empty() && clock.wallNow() < e.expiresAt) {
        answer = e.token;  // still valid: the parties verify it locally
      } else {
        answer = result.status().withContext("minting a token for audience " + audience);
      }
    }
    for (auto& done : waiters) done(answer);
  }

  const Clock& clock;
  const ServiceAccountTokensOptions options;
  std::mutex mu;
  std::map<std::string, Entry> entries;
  std::size_t minted = 0;
};

ServiceAccountTokens::ServiceAccountTokens(Client& api, const Clock& clock,
                                           ServiceAccountTokensOptions options)
    : api_(api), state_(std::make_shared<State>(clock, std::move(options))) {}

void ServiceAccountTokens::get(const std::string& audience, Callback done) {
  const WallTime now = state_->clock.wallNow();
  {
    std::unique_lock lock(state_->mu);
    auto it = state_->entries.find(audience);
    if (it == state_->entries.end()) {
      state_->makeRoomLocked(now);
      it = state_->entries.emplace(audience, State::Entry{}).first;
    }
    State::Entry& e = it->second;
    if (!e.token.empty() && now < e.renewAt) {
      std::string token = e.token;
      lock.unlock();
      done(std::move(token));
      return;
    }
    e.waiters.push_back(std::move(done));
    if (e.minting) return;
    e.minting = true;
    ++state_->minted;
  }
  const auto& o = state_->options;
  ApiRequest request = createSubresourceRequest(resources::kServiceAccounts, o.ns, o.name, "token",
                                                tokenRequestObject(audience, o.lifetime));
  api_.callAsync(std::move(request), [state = state_, audience, now](StatusOr<json> answer) {
    state->finish(audience,
                  answer.ok() ? mintedFrom(*answer, now, state->options.lifetime)
                              : StatusOr<Minted>(answer.status()),
                  now);
  });
}

std::size_t ServiceAccountTokens::minted() const {
  std::lock_guard lock(state_->mu);
  return state_->minted;
}

}  // namespace kshard::kube
