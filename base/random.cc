#include "base/random.h"

namespace kshard {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

std::uint64_t Random::uniform(std::uint64_t bound) {
  // Reject the top partial bucket so every value in [0, bound) is equally likely.
  const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
  std::uint64_t r;
  do {
    r = next();
  } while (r >= limit);
  return r % bound;
}

double Random::unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

SeededRandom::SeededRandom(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

std::uint64_t SeededRandom::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

}  // namespace kshard
