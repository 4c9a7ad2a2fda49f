// Random: an injected, seedable source of randomness. The generator (xoshiro256**, seeded through
// splitmix64) and the bounded draw are fully specified here, so one seed gives the same sequence on
// every platform and standard library: `kshardctl plan` with a seed is reproducible anywhere.
#pragma once

#include <cstdint>

namespace kshard {

class Random {
 public:
  virtual ~Random() = default;
  virtual std::uint64_t next() = 0;
  // Uniform in [0, bound); bound must be > 0. Unbiased (rejection sampling).
  std::uint64_t uniform(std::uint64_t bound);
  // Uniform in [0, 1).
  double unit();
};

class SeededRandom final : public Random {
 public:
  explicit SeededRandom(std::uint64_t seed);
  std::uint64_t next() override;

 private:
  std::uint64_t s_[4];
};

}  // namespace kshard
