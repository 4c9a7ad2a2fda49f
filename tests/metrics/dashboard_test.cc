// The Grafana dashboard the chart ships (charts/kshard/dashboards/kshard.json): valid JSON, and
// every query names only metrics that kshard-sidecar and kshard-operator export, as their
// registries expose them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/prometheus_registry.h"
#include "operator/operator_metrics.h"
#include "sidecar/sidecar_metrics.h"

namespace kshard {
namespace {

nlohmann::json readDashboard() {
  std::ifstream in(std::string(KSHARD_SOURCE_DIR) + "/charts/kshard/dashboards/kshard.json");
  EXPECT_TRUE(in) << "cannot open the dashboard";
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());  // throws, failing the test, on invalid JSON
}

// Every PromQL string of the dashboard: targets' expr and the variables' queries.
void collectQueries(const nlohmann::json& node, std::vector<std::string>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if ((key == "expr" || key == "query" || key == "definition") && value.is_string()) {
        out.push_back(value);
      }
      collectQueries(value, out);
    }
  } else if (node.is_array()) {
    for (const nlohmann::json& item : node) collectQueries(item, out);
  }
}

// The series names both binaries expose, with a series in every family (a family without one
// shows nothing), histograms as their _bucket, _sum and _count.
std::set<std::string> exportedNames() {
  metrics::PrometheusRegistry registry;
  sidecar::SidecarMetrics sidecarMetrics(registry);
  sidecarMetrics.countMessage(sidecar::MessagePath::kLocal, sidecar::MessageResult::kOk);
  sidecarMetrics.observeLatency(sidecar::MessagePath::kLocal, 0.001);
  sidecarMetrics.countRetry(sidecar::RetryReason::kNoOwner);
  sidecarMetrics.countPassivation();
  sidecarMetrics.countHandoff(true);
  sidecarMetrics.refresh({{"counter", 1}}, 1);
  sidecarMetrics.showLoad({{1, 2.0, 0.1, 1}});
  manager::OperatorMetrics operatorMetrics(registry);
  operatorMetrics.roundFinished("demo/counter", "moved", 0.5, 3);
  sharding::ShardMapStatus status;
  sharding::RegisteredPod pod;
  pod.name = "counter-0";
  pod.shards = 3;
  status.pods.push_back(pod);
  status.load = sharding::LoadStatus{1.5, 1.0, 2.0, {{1, pod.name, 0.5}}};
  operatorMetrics.observeStatus("demo/counter", status);
  operatorMetrics.setLeader(true);
  operatorMetrics.apiRequest("register", 200);
  operatorMetrics.observeThrottled("demo/counter", 1);
  operatorMetrics.throttleStarted("demo/counter", 1);

  std::set<std::string> names;
  const std::regex type(R"(# TYPE (\S+) (\S+))");
  std::istringstream lines(registry.exposition());
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, type)) continue;
    names.insert(m[1]);
    if (m[2] == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) names.insert(m[1].str() + suffix);
    }
  }
  return names;
}

TEST(GrafanaDashboard, QueriesNameOnlyMetricsKshardExports) {
  const nlohmann::json dashboard = readDashboard();
  ASSERT_TRUE(dashboard.contains("panels"));
  std::vector<std::string> queries;
  collectQueries(dashboard, queries);
  const std::set<std::string> exported = exportedNames();
  ASSERT_GE(exported.size(), 16u);
  const std::regex metric(R"(\bkshard_[a-z0-9_]+)");
  std::set<std::string> used;
  for (const std::string& q : queries) {
    for (auto it = std::sregex_iterator(q.begin(), q.end(), metric); it != std::sregex_iterator();
         ++it) {
      used.insert(it->str());
      EXPECT_TRUE(exported.count(it->str())) << it->str() << " in: " << q;
    }
  }
  // The dashboard shows both sides: each binary's messages or rounds.
  EXPECT_TRUE(used.count("kshard_sidecar_messages_total"));
  EXPECT_TRUE(used.count("kshard_operator_shard_moves_total"));
}

TEST(GrafanaDashboard, EveryPanelHasAQueryAndAPlace) {
  const nlohmann::json dashboard = readDashboard();
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    ASSERT_TRUE(panel.contains("gridPos")) << panel.value("title", "?");
    if (panel.at("type") == "row") continue;
    EXPECT_FALSE(panel.at("targets").empty()) << panel.value("title", "?");
    for (const nlohmann::json& target : panel.at("targets")) {
      EXPECT_FALSE(target.at("expr").get<std::string>().empty()) << panel.value("title", "?");
    }
  }
}

}  // namespace
}  // namespace kshard
