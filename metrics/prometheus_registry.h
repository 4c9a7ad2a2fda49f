// PrometheusRegistry: the metrics::Registry backed by prometheus-cpp's core library. The only place
// in kshard that knows prometheus-cpp; everything else sees metrics/metrics.h.
//
// Thread-safe: families and children may be created, updated and exposed from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "metrics/metrics.h"

namespace kshard::metrics {

class PrometheusRegistry : public Registry {
 public:
  PrometheusRegistry();
  ~PrometheusRegistry() override;
  PrometheusRegistry(const PrometheusRegistry&) = delete;
  PrometheusRegistry& operator=(const PrometheusRegistry&) = delete;

  Family<Counter>& counter(const std::string& name, const std::string& help) override;
  Family<Gauge>& gauge(const std::string& name, const std::string& help) override;
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               const std::vector<double>& buckets) override;
  std::string exposition() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kshard::metrics
