#include "examples/counter/counter_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "http/message.h"

namespace kshard::examples {
namespace {

StatusOr<std::string> readAll(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) return std::string();
    return unavailable("cannot read " + path + ": " + std::strerror(errno));
  }
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

StatusOr<CounterState> parse(const std::string& text, const std::string& path) {
  if (text.empty()) return CounterState{};
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j["value"].is_number_integer() || !j["epoch"].is_number_unsigned()) {
    return internalError("corrupt state file " + path);
  }
  return CounterState{j["value"].get<std::int64_t>(), j["epoch"].get<std::uint64_t>()};
}

// Holds an exclusive flock on the store's lock file for one entity.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace

CounterStore::CounterStore(std::string directory) : directory_(std::move(directory)) {}

std::string CounterStore::pathOf(const std::string& id) const {
  // Ids are arbitrary UTF-8: percent-encode them into one safe file name.
  return directory_ + "/" + http::percentEncode(id) + ".json";
}

StatusOr<CounterState> CounterStore::load(const std::string& id) const {
  const std::string path = pathOf(id);
  auto text = readAll(path);
  if (!text.ok()) return text.status();
  return parse(*text, path);
}

Status CounterStore::save(const std::string& id, const CounterState& state) const {
  const std::string path = pathOf(id);
  FileLock lock(path + ".lock");
  if (!lock.ok()) return unavailable("cannot lock " + path + ": " + std::strerror(errno));
  auto current = readAll(path);
  if (!current.ok()) return current.status();
  auto stored = parse(*current, path);
  if (!stored.ok()) return stored.status();
  if (stored->epoch > state.epoch) {
    return failedPrecondition("fenced: stored epoch " + std::to_string(stored->epoch) +
                              " is newer than " + std::to_string(state.epoch));
  }
  const std::string tmp = path + ".tmp";
  const std::string body =
      nlohmann::json{{"value", state.value}, {"epoch", state.epoch}}.dump() + "\n";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  const bool written = std::fwrite(body.data(), 1, body.size(), f) == body.size();
  if (std::fclose(f) != 0 || !written) return unavailable("cannot write " + tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return unavailable("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return {};
}

}  // namespace kshard::examples
