#include "sidecar/sidecar_metrics.h"

#include <gtest/gtest.h>

#include "metrics/prometheus_registry.h"

namespace kshard::sidecar {
namespace {

// The series of `name` with `labels` (as the exposition writes them) and its value, or "absent".
std::string series(const metrics::Registry& registry, const std::string& nameAndLabels) {
  const std::string text = registry.exposition();
  const std::string key = "\n" + nameAndLabels + " ";
  const auto at = text.find(key);
  if (at == std::string::npos) return "absent";
  const auto start = at + key.size();
  return text.substr(start, text.find('\n', start) - start);
}

TEST(SidecarMetricsTest, RefreshShowsActiveEntitiesByTypeAndDropsTypesThatWentAway) {
  metrics::PrometheusRegistry registry;
  SidecarMetrics metrics(registry);
  metrics.refresh({{"cart", 2}, {"counter", 5}}, 12);
  EXPECT_EQ(series(registry, R"(kshard_sidecar_active_entities{type="cart"})"), "2");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_active_entities{type="counter"})"), "5");
  EXPECT_EQ(series(registry, "kshard_sidecar_owned_shards"), "12");

  metrics.refresh({{"counter", 1}}, 0);
  EXPECT_EQ(series(registry, R"(kshard_sidecar_active_entities{type="cart"})"), "absent")
      << "a type with no active entity is still exported";
  EXPECT_EQ(series(registry, R"(kshard_sidecar_active_entities{type="counter"})"), "1");
  EXPECT_EQ(series(registry, "kshard_sidecar_owned_shards"), "0");

  metrics.refresh({{"cart", 3}}, 4);
  EXPECT_EQ(series(registry, R"(kshard_sidecar_active_entities{type="cart"})"), "3");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_active_entities{type="counter"})"), "absent");
}

TEST(SidecarMetricsTest, RememberedEntitiesAndTheirRecordWrites) {
  metrics::PrometheusRegistry registry;
  SidecarMetrics metrics(registry);
  metrics.showRemembered(7);
  metrics.countRecordWrite(true);
  metrics.countRecordWrite(true);
  metrics.countRecordWrite(false);
  EXPECT_EQ(series(registry, "kshard_sidecar_remembered_entities"), "7");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_remembered_record_writes_total{result="stored"})"),
            "2");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_remembered_record_writes_total{result="failed"})"),
            "1");
}

TEST(SidecarMetricsTest, ShowMapSyncCountsHowVersionsCame) {
  metrics::PrometheusRegistry registry;
  SidecarMetrics metrics(registry);
  metrics.showMapSync({.deltas = 3, .apiReads = 2, .bytesManager = 900, .bytesApi = 40000});
  EXPECT_EQ(series(registry, R"(kshard_sidecar_map_versions_total{source="changes"})"), "3");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_map_versions_total{source="api"})"), "2");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_map_bytes_total{source="manager"})"), "900");
  // Running totals: a scrape adds what came since the last one.
  metrics.showMapSync({.deltas = 10, .apiReads = 2, .bytesManager = 2000, .bytesApi = 40000});
  EXPECT_EQ(series(registry, R"(kshard_sidecar_map_versions_total{source="changes"})"), "10");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_map_bytes_total{source="manager"})"), "2000");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_map_bytes_total{source="api"})"), "40000");
}

TEST(SidecarMetricsTest, ShowLoadExportsThePodsTotalsAndOnlyTheBusiestShards) {
  metrics::PrometheusRegistry registry;
  SidecarMetrics metrics(registry);
  std::vector<ShardLoad> load;
  for (sharding::ShardId s = 1; s <= 7; ++s) load.push_back({s, 10.0 * s, 0.01 * s, 1});
  metrics.showLoad(load);
  EXPECT_EQ(series(registry, "kshard_sidecar_load_messages_per_second"), "280");
  EXPECT_EQ(series(registry, "kshard_sidecar_load_busy_ratio"), "0.28");
  for (sharding::ShardId s = 3; s <= 7; ++s) {
    EXPECT_NE(series(registry,
                     "kshard_sidecar_shard_load_busy_ratio{shard=\"" + std::to_string(s) + "\"}"),
              "absent")
        << s;
  }
  for (sharding::ShardId s = 1; s <= 2; ++s) {
    EXPECT_EQ(series(registry,
                     "kshard_sidecar_shard_load_busy_ratio{shard=\"" + std::to_string(s) + "\"}"),
              "absent")
        << s << " is not among the " << SidecarMetrics::kTopShards << " busiest";
  }

  // Shard 1 becomes the busiest and 7 leaves: its series goes.
  load[0].busy = 1;
  load.pop_back();
  metrics.showLoad(load);
  EXPECT_EQ(series(registry, R"(kshard_sidecar_shard_load_busy_ratio{shard="1"})"), "1");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_shard_load_busy_ratio{shard="7"})"), "absent");
  EXPECT_EQ(series(registry, R"(kshard_sidecar_shard_load_busy_ratio{shard="2"})"), "absent");
}

}  // namespace
}  // namespace kshard::sidecar
