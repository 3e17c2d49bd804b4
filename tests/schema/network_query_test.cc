// A query that times a whole network under a schedule (protocol 6): what
// the search's verification sends.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "common/ios_json.h"
#include "common/zoo.h"
#include "schema/farm.capnp.h"
#include "schema/protocol.h"

namespace ios::schema {
namespace {

using ::testing::HasSubstr;

NetworkSpec SqueezeNetInNodeOrder() {
  NetworkSpec spec;
  spec.graph = BuildZooModel("squeezenet");
  for (NodeId id = 1; id < static_cast<NodeId>(spec.graph.nodes.size()); ++id) {
    spec.stages.push_back({Strategy::kParallel, {{id}}});
  }
  spec.weight_seed = 7;
  return spec;
}

DecodeError Refusal(const std::string& bytes) {
  auto decoded = Decode(bytes);
  EXPECT_TRUE(std::holds_alternative<DecodeError>(decoded));
  return std::holds_alternative<DecodeError>(decoded) ? std::get<DecodeError>(decoded)
                                                      : DecodeError{};
}

// A raw query frame with valid settings, its network (and stage) filled
// in by `fill`: for frames our encoder never writes.
template <typename Fill>
std::string RawQuery(uint64_t id, Fill fill) {
  capnp::MallocMessageBuilder builder;
  auto envelope = builder.initRoot<wire::Envelope>();
  envelope.setVersion(kProtocolVersion);
  auto query = envelope.initQuery();
  query.setQueryId(id);
  query.setBatchSize(1);
  query.setDtype("float32");
  query.setNumber(1);
  query.setRepeat(1);
  fill(query);
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.asBytes().begin()),
                     words.asBytes().size());
}

TEST(NetworkQueryTest, RoundTripsTheGraphTheStagesAndTheSeed) {
  NetworkSpec sent = SqueezeNetInNodeOrder();
  // Two operators of one group and a second group: grouping survives.
  sent.stages[1].groups.front().push_back(sent.stages[2].groups.front().front());
  sent.stages.erase(sent.stages.begin() + 2);
  MeasureSettings settings;
  settings.repeat = 10;
  const std::string bytes = EncodeNetworkQuery(42, sent, 4, settings, 9000);
  auto decoded = Decode(bytes);
  ASSERT_TRUE(std::holds_alternative<Message>(decoded)) << std::get<DecodeError>(decoded).message;
  const auto& query = std::get<StageQuery>(std::get<Message>(decoded));
  EXPECT_EQ(query.query_id, 42u);
  EXPECT_EQ(query.batch_size, 4);
  EXPECT_EQ(query.timeout_ms, 9000u);
  EXPECT_EQ(query.settings.Key(), settings.Key());
  ASSERT_NE(query.network, nullptr);
  EXPECT_TRUE(query.stage.groups.empty());
  std::string difference;
  EXPECT_TRUE(StructurallyEqual(query.network->graph, sent.graph, &difference)) << difference;
  EXPECT_EQ(NetworkKey(*query.network), NetworkKey(sent));
  EXPECT_EQ(query.network->weight_seed, 7u);
  EXPECT_THAT(query.Describe(), HasSubstr("network squeezenet"));
  // Encoding the decoded query gives the same frame.
  EXPECT_EQ(Encode(query), bytes);
}

TEST(NetworkQueryTest, TheBiggestZooNetworkFitsInOneFrame) {
  NetworkSpec nasnet;
  nasnet.graph = BuildZooModel("nasnet");
  for (NodeId id = 1; id < static_cast<NodeId>(nasnet.graph.nodes.size()); ++id) {
    nasnet.stages.push_back({Strategy::kParallel, {{id}}});
  }
  const std::string bytes = EncodeNetworkQuery(1, nasnet, 1, MeasureSettings{});
  EXPECT_LT(bytes.size(), kMaxMessageBytes);
  EXPECT_TRUE(std::holds_alternative<Message>(Decode(bytes)));
}

TEST(NetworkQueryTest, AScheduleThatDoesNotCoverTheGraphIsRefusedWithItsQueryId) {
  NetworkSpec spec = SqueezeNetInNodeOrder();
  spec.stages.pop_back();
  const DecodeError error = Refusal(EncodeNetworkQuery(77, spec, 1, MeasureSettings{}));
  EXPECT_EQ(error.kind, DecodeError::Kind::kInvalid);
  EXPECT_THAT(error.message, HasSubstr("query.network"));
  EXPECT_THAT(error.message, HasSubstr("never runs"));
  EXPECT_EQ(error.query_id, 77u);
}

TEST(NetworkQueryTest, AGraphThatDoesNotParseIsRefusedNamingTheField) {
  const DecodeError error = Refusal(RawQuery(5, [](auto query) {
    query.initNetwork().setGraphJson("{\"name\": \"broken\", \"input\": [3, 8]}");
  }));
  EXPECT_EQ(error.kind, DecodeError::Kind::kInvalid);
  EXPECT_THAT(error.message, HasSubstr("query.network.graphJson"));
  EXPECT_EQ(error.query_id, 5u);
}

TEST(NetworkQueryTest, AQueryWithAStageAndANetworkIsRefused) {
  const DecodeError error = Refusal(RawQuery(6, [](auto query) {
    query.initStage();
    query.initNetwork();
  }));
  EXPECT_THAT(error.message, HasSubstr("both a stage and a network"));
}

}  // namespace
}  // namespace ios::schema
