#include "metrics/prometheus_registry.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <variant>

namespace kshard::metrics {

namespace {

// Counters and histograms are updated per message by every I/O thread. prometheus-cpp keeps one
// atomic per value (and a histogram takes a mutex per observation), so two threads counting the
// same message kind passed those cache lines back and forth on every message. Updates here go
// to per-thread cells instead (kStripes of them, each on cache lines of its own); reading a value
// adds the cells up, and an exposition hands prometheus-cpp what grew since the last one.
constexpr std::size_t kStripes = 8;

std::size_t stripe() {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return mine;
}

// A cache line of 64-bit words: a stripe's cells start on a line of their own.
struct alignas(64) Line {
  std::atomic<std::uint64_t> word[8];
};

double asDouble(std::uint64_t bits) { return std::bit_cast<double>(bits); }

// Adds to a double kept as its bits; the cell is nearly always this thread's alone, so the first
// exchange succeeds.
void addDouble(std::atomic<std::uint64_t>& cell, double amount) {
  std::uint64_t seen = cell.load(std::memory_order_relaxed);
  while (!cell.compare_exchange_weak(seen, std::bit_cast<std::uint64_t>(asDouble(seen) + amount),
                                     std::memory_order_relaxed)) {
  }
}

// `words` 64-bit cells per stripe, zeroed; cell(s, i) is word i of stripe s.
class StripedCells {
 public:
  explicit StripedCells(std::size_t words)
      : linesPerStripe_((words + 7) / 8), lines_(new Line[linesPerStripe_ * kStripes]) {
    for (std::size_t l = 0; l < linesPerStripe_ * kStripes; ++l) {
      for (auto& w : lines_[l].word) w.store(0, std::memory_order_relaxed);
    }
  }
  std::atomic<std::uint64_t>& cell(std::size_t stripe, std::size_t i) const {
    return lines_[stripe * linesPerStripe_ + i / 8].word[i % 8];
  }
  std::uint64_t sumCount(std::size_t i) const {
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < kStripes; ++s) total += cell(s, i).load(std::memory_order_relaxed);
    return total;
  }
  double sumDouble(std::size_t i) const {
    double total = 0;
    for (std::size_t s = 0; s < kStripes; ++s) {
      total += asDouble(cell(s, i).load(std::memory_order_relaxed));
    }
    return total;
  }

 private:
  const std::size_t linesPerStripe_;
  const std::unique_ptr<Line[]> lines_;
};

class CounterChild : public Counter {
 public:
  CounterChild(prometheus::Counter& c, const std::vector<double>& /*buckets*/) : c_(c), cells_(1) {}
  void inc(double amount) override {
    if (amount > 0) addDouble(cells_.cell(stripe(), 0), amount);  // as prometheus-cpp: no decrease
  }
  double value() const override { return cells_.sumDouble(0); }
  // Under the family's lock.
  void flush() {
    const double total = value();
    if (total > flushed_) c_.Increment(total - flushed_);
    flushed_ = std::max(flushed_, total);
  }

 private:
  prometheus::Counter& c_;
  StripedCells cells_;
  double flushed_ = 0;  // what c_ holds
};

class GaugeChild : public Gauge {
 public:
  GaugeChild(prometheus::Gauge& g, const std::vector<double>& /*buckets*/) : g_(g) {}
  void set(double value) override { g_.Set(value); }
  void inc(double amount) override { g_.Increment(amount); }
  void dec(double amount) override { g_.Decrement(amount); }
  double value() const override { return g_.Value(); }
  void flush() {}  // set directly: gauges are not on per-message paths

 private:
  prometheus::Gauge& g_;
};

class HistogramChild : public Histogram {
 public:
  // Cells per stripe: one count per bucket (the last is +Inf), then the sum.
  HistogramChild(prometheus::Histogram& h, const std::vector<double>& buckets)
      : h_(h),
        bounds_(buckets),
        cells_(buckets.size() + 2),
        flushedCounts_(buckets.size() + 1, 0) {}
  void observe(double value) override {
    // The bucket whose upper bound is the first at or above the value, as prometheus-cpp does.
    const auto bucket = static_cast<std::size_t>(
        std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    const std::size_t s = stripe();
    cells_.cell(s, bucket).fetch_add(1, std::memory_order_relaxed);
    addDouble(cells_.cell(s, sumCell()), value);
  }
  std::uint64_t count() const override {
    std::uint64_t total = 0;
    for (std::size_t b = 0; b <= bounds_.size(); ++b) total += cells_.sumCount(b);
    return total;
  }
  double sum() const override { return cells_.sumDouble(sumCell()); }
  // Under the family's lock. A sum may trail its count by the observations in progress.
  void flush() {
    std::vector<double> increments(bounds_.size() + 1);
    bool grew = false;
    for (std::size_t b = 0; b <= bounds_.size(); ++b) {
      const std::uint64_t total = cells_.sumCount(b);
      increments[b] = static_cast<double>(total - flushedCounts_[b]);
      grew = grew || total != flushedCounts_[b];
      flushedCounts_[b] = total;
    }
    const double total = sum();
    if (grew || total != flushedSum_) h_.ObserveMultiple(increments, total - flushedSum_);
    flushedSum_ = total;
  }

 private:
  std::size_t sumCell() const { return bounds_.size() + 1; }

  prometheus::Histogram& h_;
  const std::vector<double> bounds_;
  StripedCells cells_;
  std::vector<std::uint64_t> flushedCounts_;  // what h_ holds
  double flushedSum_ = 0;
};

// One family: our children wrap prometheus-cpp's, created on first use of a label set.
template <typename Metric, typename PromMetric, typename Child>
class FamilyAdapter : public Family<Metric> {
 public:
  FamilyAdapter(prometheus::Family<PromMetric>& family, std::vector<double> buckets)
      : family_(family), buckets_(std::move(buckets)) {}

  Metric& with(const Labels& labels) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = children_.find(labels);
    if (it == children_.end()) {
      PromMetric* metric = nullptr;
      if constexpr (std::is_same_v<PromMetric, prometheus::Histogram>) {
        metric = &family_.Add(labels, buckets_);
      } else {
        metric = &family_.Add(labels);
      }
      it = children_.emplace(labels, Entry{metric, std::make_unique<Child>(*metric, buckets_)})
               .first;
    }
    return *it->second.child;
  }

  // Hands every child's growth to prometheus-cpp, before an exposition.
  void flush() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [labels, entry] : children_) entry.child->flush();
  }

  void remove(const Labels& labels) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = children_.find(labels);
    if (it == children_.end()) return;
    family_.Remove(it->second.metric);
    children_.erase(it);
  }

 private:
  struct Entry {
    PromMetric* metric;
    std::unique_ptr<Child> child;
  };
  prometheus::Family<PromMetric>& family_;
  const std::vector<double> buckets_;
  std::mutex mu_;
  std::map<Labels, Entry> children_;
};

using CounterFamily = FamilyAdapter<Counter, prometheus::Counter, CounterChild>;
using GaugeFamily = FamilyAdapter<Gauge, prometheus::Gauge, GaugeChild>;
using HistogramFamily = FamilyAdapter<Histogram, prometheus::Histogram, HistogramChild>;

}  // namespace

struct PrometheusRegistry::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::mutex mu;
  std::map<std::string, std::variant<std::unique_ptr<CounterFamily>, std::unique_ptr<GaugeFamily>,
                                     std::unique_ptr<HistogramFamily>>>
      families;

  template <typename F, typename Build>
  F& family(const std::string& name, Build build) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = families.find(name);
    if (it == families.end()) it = families.emplace(name, build()).first;
    auto* existing = std::get_if<std::unique_ptr<F>>(&it->second);
    if (existing == nullptr) {
      throw std::logic_error("metric " + name + " is already registered as another kind");
    }
    return **existing;
  }
};

PrometheusRegistry::PrometheusRegistry() : impl_(std::make_unique<Impl>()) {}
PrometheusRegistry::~PrometheusRegistry() = default;

Family<Counter>& PrometheusRegistry::counter(const std::string& name, const std::string& help) {
  return impl_->family<CounterFamily>(name, [&] {
    auto& f = prometheus::BuildCounter().Name(name).Help(help).Register(*impl_->registry);
    return std::make_unique<CounterFamily>(f, std::vector<double>{});
  });
}

Family<Gauge>& PrometheusRegistry::gauge(const std::string& name, const std::string& help) {
  return impl_->family<GaugeFamily>(name, [&] {
    auto& f = prometheus::BuildGauge().Name(name).Help(help).Register(*impl_->registry);
    return std::make_unique<GaugeFamily>(f, std::vector<double>{});
  });
}

Family<Histogram>& PrometheusRegistry::histogram(const std::string& name, const std::string& help,
                                                 const std::vector<double>& buckets) {
  return impl_->family<HistogramFamily>(name, [&] {
    auto& f = prometheus::BuildHistogram().Name(name).Help(help).Register(*impl_->registry);
    return std::make_unique<HistogramFamily>(f, buckets);
  });
}

std::string PrometheusRegistry::exposition() const {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& [name, family] : impl_->families) {
      std::visit([](auto& f) { f->flush(); }, family);
    }
  }
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace kshard::metrics
