// Metrics: kshard's instrumentation interface. Components declare their metrics once, at
// construction, from a Registry passed in by reference; the prometheus-cpp adapter
// (metrics/prometheus_registry.h) is the only place that knows the library.
//
// Names follow kshard_<component>_<thing>_<unit>, with _total on counters and base units
// (seconds, bytes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kshard::metrics {

using Labels = std::map<std::string, std::string>;

// What counters and gauges share: one number, which inc() adds to and value() reads.
class Scalar {
 public:
  virtual ~Scalar() = default;
  virtual void inc(double amount = 1.0) = 0;
  virtual double value() const = 0;
};

// Only goes up: inc() ignores an amount that is not positive.
class Counter : public Scalar {};

class Gauge : public Scalar {
 public:
  virtual void set(double value) = 0;
  virtual void dec(double amount = 1.0) = 0;
};

class Histogram {
 public:
  virtual ~Histogram() = default;
  virtual void observe(double value) = 0;
  virtual std::uint64_t count() const = 0;
  virtual double sum() const = 0;
};

// A metric name with a fixed set of label names; with() returns the child for label values.
// Children live as long as the registry; references may be cached on hot paths.
template <typename Metric>
class Family {
 public:
  virtual ~Family() = default;
  virtual Metric& with(const Labels& labels) = 0;
  // Removes a child (e.g. a ShardMap that was deleted). References to it become invalid: drop
  // cached ones first. A later with() of the same labels starts a new child from zero.
  virtual void remove(const Labels& labels) = 0;
};

// Asking twice for the same name returns the same family; the same name with another kind of
// metric is a programming error (std::logic_error, at construction time).
class Registry {
 public:
  virtual ~Registry() = default;
  virtual Family<Counter>& counter(const std::string& name, const std::string& help) = 0;
  virtual Family<Gauge>& gauge(const std::string& name, const std::string& help) = 0;
  // `buckets` are upper bounds in increasing order.
  virtual Family<Histogram>& histogram(const std::string& name, const std::string& help,
                                       const std::vector<double>& buckets) = 0;
  // The Prometheus text exposition format (version 0.0.4) of everything registered.
  virtual std::string exposition() const = 0;
};

// Latency buckets in seconds, 100 µs to 10 s.
const std::vector<double>& latencyBuckets();

}  // namespace kshard::metrics
