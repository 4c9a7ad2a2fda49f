#include "metrics/prometheus_registry.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <variant>

namespace kshard::metrics {

namespace {

class CounterChild : public Counter {
 public:
  explicit CounterChild(prometheus::Counter& c) : c_(c) {}
  void inc(double amount) override { c_.Increment(amount); }
  double value() const override { return c_.Value(); }

 private:
  prometheus::Counter& c_;
};

class GaugeChild : public Gauge {
 public:
  explicit GaugeChild(prometheus::Gauge& g) : g_(g) {}
  void set(double value) override { g_.Set(value); }
  void inc(double amount) override { g_.Increment(amount); }
  void dec(double amount) override { g_.Decrement(amount); }
  double value() const override { return g_.Value(); }

 private:
  prometheus::Gauge& g_;
};

class HistogramChild : public Histogram {
 public:
  explicit HistogramChild(prometheus::Histogram& h) : h_(h) {}
  void observe(double value) override { h_.Observe(value); }
  std::uint64_t count() const override { return h_.Collect().histogram.sample_count; }
  double sum() const override { return h_.Collect().histogram.sample_sum; }

 private:
  prometheus::Histogram& h_;
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
      it = children_.emplace(labels, Entry{metric, std::make_unique<Child>(*metric)}).first;
    }
    return *it->second.child;
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
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace kshard::metrics
