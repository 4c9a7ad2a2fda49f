#include "metrics/prometheus_registry.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

namespace kshard::metrics {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PrometheusRegistryTest, CounterFamilyWithLabelChildren) {
  PrometheusRegistry registry;
  auto& family = registry.counter("kshard_sidecar_messages_total", "Messages handled.");
  family.with({{"mode", "ask"}}).inc();
  family.with({{"mode", "ask"}}).inc(2);
  family.with({{"mode", "tell"}}).inc();
  EXPECT_EQ(family.with({{"mode", "ask"}}).value(), 3);

  const std::string text = registry.exposition();
  EXPECT_TRUE(contains(text, "# HELP kshard_sidecar_messages_total Messages handled.\n")) << text;
  EXPECT_TRUE(contains(text, "# TYPE kshard_sidecar_messages_total counter\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_messages_total{mode=\"ask\"} 3\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_messages_total{mode=\"tell\"} 1\n")) << text;
}

TEST(PrometheusRegistryTest, GaugeSetIncDec) {
  PrometheusRegistry registry;
  auto& g = registry.gauge("kshard_operator_pods", "Registered pods.").with({{"shard_map", "d/c"}});
  g.set(5);
  g.inc(2);
  g.dec();
  EXPECT_EQ(g.value(), 6);
  const std::string text = registry.exposition();
  EXPECT_TRUE(contains(text, "# TYPE kshard_operator_pods gauge\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_operator_pods{shard_map=\"d/c\"} 6\n")) << text;
}

TEST(PrometheusRegistryTest, HistogramBucketsAreCumulative) {
  PrometheusRegistry registry;
  auto& h = registry.histogram("kshard_sidecar_send_seconds", "Send latency.", {0.1, 1.0})
                .with({{"mode", "ask"}});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_DOUBLE_EQ(h.sum(), 5.55);
  const std::string text = registry.exposition();
  EXPECT_TRUE(contains(text, "# TYPE kshard_sidecar_send_seconds histogram\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_send_seconds_bucket{mode=\"ask\",le=\"0.1\"} 1\n"))
      << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_send_seconds_bucket{mode=\"ask\",le=\"1\"} 2\n"))
      << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_send_seconds_bucket{mode=\"ask\",le=\"+Inf\"} 3\n"))
      << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_send_seconds_count{mode=\"ask\"} 3\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_sidecar_send_seconds_sum{mode=\"ask\"} 5.55")) << text;
}

TEST(PrometheusRegistryTest, UpdatesFromManyThreadsAreAllCountedAndEachExpositionIsCurrent) {
  PrometheusRegistry registry;
  auto& counter = registry.counter("kshard_test_total", "Test.").with({});
  auto& histogram = registry.histogram("kshard_test_seconds", "Test.", {0.1, 1.0}).with({});
  constexpr int kThreads = 12;  // more than the per-thread cells, so some threads share one
  constexpr int kEach = 20000;
  auto run = [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          counter.inc();
          histogram.observe(t % 2 == 0 ? 0.5 : 2.0);
        }
      });
    }
    for (auto& t : threads) t.join();
  };
  run();
  constexpr int kTotal = kThreads * kEach;
  EXPECT_EQ(counter.value(), kTotal);
  EXPECT_EQ(histogram.count(), static_cast<std::uint64_t>(kTotal));
  EXPECT_DOUBLE_EQ(histogram.sum(), kTotal / 2 * 0.5 + kTotal / 2 * 2.0);
  std::string text = registry.exposition();
  EXPECT_TRUE(contains(text, "kshard_test_total " + std::to_string(kTotal) + "\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_test_seconds_bucket{le=\"0.1\"} 0\n")) << text;
  EXPECT_TRUE(
      contains(text, "kshard_test_seconds_bucket{le=\"1\"} " + std::to_string(kTotal / 2) + "\n"))
      << text;
  EXPECT_TRUE(contains(text, "kshard_test_seconds_count " + std::to_string(kTotal) + "\n")) << text;

  // A second exposition adds only what came since the first.
  run();
  counter.inc(0.5);
  text = registry.exposition();
  EXPECT_TRUE(contains(text, "kshard_test_total " + std::to_string(2 * kTotal) + ".5\n")) << text;
  EXPECT_TRUE(contains(text, "kshard_test_seconds_count " + std::to_string(2 * kTotal) + "\n"))
      << text;
  EXPECT_TRUE(contains(text, "kshard_test_seconds_sum " + std::to_string(3 * kTotal / 2 + kTotal)))
      << text;
  EXPECT_EQ(registry.exposition(), text) << "an exposition with no update in between differs";
}

TEST(PrometheusRegistryTest, ACounterNeverDecreases) {
  PrometheusRegistry registry;
  auto& c = registry.counter("kshard_test_total", "Test.").with({});
  c.inc(2);
  c.inc(-1);
  EXPECT_EQ(c.value(), 2);
  EXPECT_TRUE(contains(registry.exposition(), "kshard_test_total 2\n"));
}

TEST(PrometheusRegistryTest, SameNameReturnsSameFamilyAndOtherKindIsRejected) {
  PrometheusRegistry registry;
  auto& a = registry.counter("kshard_x_total", "X.");
  auto& b = registry.counter("kshard_x_total", "X.");
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(registry.gauge("kshard_x_total", "X."), std::logic_error);
}

TEST(PrometheusRegistryTest, RemovedChildDisappearsAndRestartsFromZero) {
  PrometheusRegistry registry;
  auto& family = registry.gauge("kshard_operator_shards", "Shards.");
  family.with({{"shard_map", "a"}}).set(7);
  family.with({{"shard_map", "b"}}).set(1);
  family.remove({{"shard_map", "a"}});
  const std::string text = registry.exposition();
  EXPECT_FALSE(contains(text, "shard_map=\"a\"")) << text;
  EXPECT_TRUE(contains(text, "kshard_operator_shards{shard_map=\"b\"} 1\n")) << text;
  EXPECT_EQ(family.with({{"shard_map", "a"}}).value(), 0);
}

TEST(PrometheusRegistryTest, LabelValuesAreEscaped) {
  PrometheusRegistry registry;
  registry.counter("kshard_y_total", "Y.").with({{"id", "a\"b\\c\nd"}}).inc();
  const std::string text = registry.exposition();
  EXPECT_TRUE(contains(text, "kshard_y_total{id=\"a\\\"b\\\\c\\nd\"} 1\n")) << text;
}

TEST(LatencyBucketsTest, IncreasingFrom100MicrosecondsTo10Seconds) {
  const auto& b = latencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 0.0001);
  EXPECT_DOUBLE_EQ(b.back(), 10.0);
  for (std::size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

}  // namespace
}  // namespace kshard::metrics
