#include "sharding/json_delta.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace kshard::sharding {
namespace {

using nlohmann::json;

json applied(const json& from, const json& delta) {
  auto out = applyJsonDelta(from, delta);
  EXPECT_TRUE(out.ok()) << out.status().toString() << "\ndelta: " << delta.dump();
  return out.valueOr(json());
}

// A status-like document: pods and assignments of `pods` pods.
json statusOf(int pods, int epoch) {
  json s = {{"epoch", epoch}, {"pods", json::array()}, {"assignments", json::array()}};
  for (int i = 0; i < pods; ++i) {
    const std::string name = "counter-7d9c8b5f4-" + std::to_string(10000 + i);
    s["pods"].push_back({{"name", name},
                         {"uid", "0c5e2a4e-8f1b-4a53-9d7e-" + std::to_string(100000000000 + i)},
                         {"address", "10.244.1." + std::to_string(i % 250) + ":7101"},
                         {"version", "v1"},
                         {"shards", 10},
                         {"incarnation", "a1b2c3d4e5f6" + std::to_string(i)}});
    s["assignments"].push_back(
        {{"pod", name}, {"epoch", 3}, {"shards", std::to_string(i * 10 + 1) + "-" +
                                                     std::to_string(i * 10 + 10)}});
  }
  return {{"metadata", {{"name", "counter"}, {"resourceVersion", "1"}}},
          {"spec", {{"shards", pods * 10}}},
          {"status", s}};
}

TEST(JsonDeltaTest, EqualDocumentsHaveNoChanges) {
  const json a = statusOf(5, 1);
  EXPECT_EQ(diffJson(a, a), json::array());
  EXPECT_EQ(applied(a, json::array()), a);
}

TEST(JsonDeltaTest, ScalarsMembersAndDeletions) {
  const json a = {{"a", 1}, {"b", {{"c", "x"}, {"d", true}}}, {"gone", 3}};
  const json b = {{"a", 2}, {"b", {{"c", "x"}, {"e", nullptr}}}, {"new", {1, 2}}};
  const json d = diffJson(a, b);
  EXPECT_EQ(applied(a, d), b);
  // Only what changed travels: "c" is not in the delta.
  EXPECT_EQ(d.dump().find("\"x\""), std::string::npos) << d.dump();
}

TEST(JsonDeltaTest, ARoundThatMovesOnePercentIsSmall) {
  const json a = statusOf(1000, 3);
  json b = a;
  b["metadata"]["resourceVersion"] = "2";
  b["status"]["epoch"] = 4;
  // 100 shards move: 100 donors lose one, 100 receivers gain one at the new epoch.
  for (int i = 0; i < 100; ++i) {
    auto& donor = b["status"]["pods"][static_cast<std::size_t>(i * 2)];
    auto& receiver = b["status"]["pods"][static_cast<std::size_t>(i * 2 + 1)];
    donor["shards"] = 9;
    receiver["shards"] = 11;
    const int first = i * 20 + 1;
    b["status"]["assignments"][static_cast<std::size_t>(i * 2)]["shards"] =
        std::to_string(first) + "-" + std::to_string(first + 8);
    b["status"]["assignments"].push_back({{"pod", receiver["name"]},
                                          {"epoch", 4},
                                          {"shards", std::to_string(first + 9)}});
  }
  const json d = diffJson(a, b);
  EXPECT_EQ(applied(a, d), b);
  const std::size_t whole = b.dump().size();
  const std::size_t delta = d.dump().size();
  EXPECT_LT(delta, 16u * 1024) << "whole " << whole << " bytes";
  EXPECT_LT(delta * 10, whole);
}

// A long shard list in text that gains and loses a few shards travels as those few.
TEST(JsonDeltaTest, LongListsInTextAreEditedTokenByToken) {
  std::string before;
  std::string after;
  for (int shard = 1; shard <= 3000; shard += 7) {
    const std::string t = std::to_string(shard);
    before += (before.empty() ? "" : ",") + t;
    if (shard % 700 != 1) after += (after.empty() ? "" : ",") + t;  // a few leave
    if (shard % 500 == 1) after += "," + std::to_string(shard + 1);   // a few join
  }
  const json a = {{"unassigned", before}, {"short", "1,2"}};
  const json b = {{"unassigned", after}, {"short", "1,3"}};
  const json d = diffJson(a, b);
  EXPECT_EQ(applied(a, d), b);
  EXPECT_LT(d.dump().size(), 200u) << d.dump();
  EXPECT_NE(d.dump().find("\"t\""), std::string::npos) << d.dump();
  // Edge cases of the token split: empty text, empty tokens, a lone comma.
  for (const auto& [x, y] : std::vector<std::pair<std::string, std::string>>{
           {std::string(70, '1') + ",2", ""},
           {std::string(70, '1') + ",,2", std::string(70, '1') + ","},
           {"," + std::string(70, '1'), ","},
       }) {
    const json from = {{"s", x}};
    const json to = {{"s", y}};
    EXPECT_EQ(applied(from, diffJson(from, to)), to) << x << " -> " << y;
  }
}

TEST(JsonDeltaTest, PodsRemovedAndAppendedKeepTheirOrder) {
  const json a = statusOf(50, 3);
  json b = a;
  auto& pods = b["status"]["pods"];
  pods.erase(7);
  pods.erase(0);
  pods.push_back({{"name", "counter-new"}, {"uid", "u"}, {"address", "10.0.0.1:7101"}});
  const json d = diffJson(a, b);
  EXPECT_EQ(applied(a, d), b);
}

TEST(JsonDeltaTest, RefusesADeltaThatDoesNotFit) {
  const json a = {{"list", {1, 2, 3}}, {"obj", {{"k", 1}}}};
  for (const json& bad : {
           json::parse(R"([{"p":["list"],"e":[4]}])"),               // copies past the end
           json::parse(R"([{"p":["list"],"e":[{"m":{"a":1}}]}])"),    // merges into a number
           json::parse(R"([{"p":["missing","x"],"v":1}])"),           // no such parent
           json::parse(R"([{"p":["obj","nope"],"d":true}])"),         // deletes nothing
           json::parse(R"([{"p":["obj"],"e":[1]}])"),                 // edits an object
           json::parse(R"([{"p":[],"v":1}])"),                        // empty path
           json::parse(R"([{"p":["list"],"e":[0]}])"),                // a zero count
           json::parse(R"([{"p":["list"],"e":["text"]}])"),           // an unknown op
           json::parse(R"([{"p":["list"]}])"),                        // no action
           json::parse(R"([{"p":["list"],"t":[1]}])"),                // a token edit of an array
           json::parse(R"([{"p":["obj","k"],"t":[1]}])"),             // ... of a number
           json::parse(R"({"p":["list"]})"),                          // not an array
       }) {
    auto out = applyJsonDelta(a, bad);
    EXPECT_FALSE(out.ok()) << bad.dump();
    if (!out.ok()) {
      EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

// Random documents with random edits: applying the diff always gives the target.
json randomValue(std::mt19937& rng, int depth);

json randomArray(std::mt19937& rng, int depth) {
  json out = json::array();
  const int n = static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) {
    if (rng() % 2 == 0) {
      out.push_back({{"name", "p" + std::to_string(rng() % 8)}, {"n", rng() % 4}});
    } else {
      out.push_back(randomValue(rng, depth + 1));
    }
  }
  return out;
}

json randomValue(std::mt19937& rng, int depth) {
  switch (depth > 2 ? rng() % 3 : rng() % 5) {
    case 0: return static_cast<int>(rng() % 5);
    case 1: {
      if (rng() % 3 != 0) return "s" + std::to_string(rng() % 3);
      std::string list;  // a long comma list, sometimes with empty tokens
      const int n = 20 + static_cast<int>(rng() % 20);
      for (int i = 0; i < n; ++i) list += (i ? "," : "") + std::to_string(rng() % 40);
      if (rng() % 4 == 0) list += ",,";
      return list;
    }
    case 2: return nullptr;
    case 3: return randomArray(rng, depth);
    default: {
      json o = json::object();
      const int n = static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) o["k" + std::to_string(rng() % 6)] = randomValue(rng, depth + 1);
      return o;
    }
  }
}

json mutate(json doc, std::mt19937& rng) {
  for (auto& [key, value] : doc.items()) {
    if (rng() % 3 != 0) continue;
    if (value.is_array() && !value.empty() && rng() % 2 == 0) {
      auto& e = value[rng() % value.size()];
      if (e.is_object()) {
        e["n"] = rng() % 4;
      } else {
        e = randomValue(rng, 3);
      }
      if (rng() % 2 == 0) value.erase(rng() % value.size());
      if (rng() % 2 == 0) value.push_back(randomValue(rng, 3));
    } else if (value.is_object()) {
      value = mutate(value, rng);
    } else if (value.is_string() && value.get<std::string>().find(',') != std::string::npos) {
      // A few tokens of a long list changed, dropped or added.
      std::string text = value.get<std::string>();
      for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
        const std::size_t at = rng() % text.size();
        const std::size_t comma = text.find(',', at);
        if (rng() % 2 == 0 && comma != std::string::npos) {
          text.erase(at, comma - at + 1);
        } else {
          text.insert(at, std::to_string(rng() % 50) + ",");
        }
      }
      value = text;
    } else {
      value = randomValue(rng, 1);
    }
  }
  if (rng() % 4 == 0) doc["k" + std::to_string(rng() % 6)] = randomValue(rng, 1);
  if (rng() % 4 == 0 && !doc.empty()) doc.erase(doc.begin());
  return doc;
}

TEST(JsonDeltaTest, RandomDocumentsRoundTrip) {
  std::mt19937 rng(20261128);
  int tokenEdits = 0;
  int arrayEdits = 0;
  for (int round = 0; round < 3000; ++round) {
    json a = json::object();
    for (int i = 0; i < 6; ++i) a["k" + std::to_string(i)] = randomValue(rng, 0);
    const json b = rng() % 2 == 0 ? mutate(a, rng) : mutate(mutate(a, rng), rng);
    const json d = diffJson(a, b);
    for (const auto& c : d) {
      tokenEdits += c.contains("t") ? 1 : 0;
      arrayEdits += c.contains("e") ? 1 : 0;
    }
    ASSERT_EQ(applied(a, d), b) << "from " << a.dump() << "\nto " << b.dump();
  }
  // The documents exercise every kind of edit, not only whole values.
  EXPECT_GT(tokenEdits, 100);
  EXPECT_GT(arrayEdits, 100);
}

TEST(JsonDeltaTest, DigestIsFnv1a64) {
  EXPECT_EQ(textDigest(""), "cbf29ce484222325");
  EXPECT_EQ(textDigest("a"), "af63dc4c8601ec8c");
  EXPECT_NE(textDigest("{\"a\":1}"), textDigest("{\"a\":2}"));
}

}  // namespace
}  // namespace kshard::sharding
