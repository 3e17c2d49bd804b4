// A real ios::worker::Worker against a hand-driven coordinator that
// misbehaves on purpose: garbage, other protocol versions, restarts, lost
// connections, queries it must refuse, a lost device. Every wait is bounded.
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "tests/farm/farm_testing.h"
#include "tests/farm/farm_worker_testing.h"

namespace ios::farm_testing {
namespace {

TEST(FarmTest, WorkerSurvivesGarbageFromItsCoordinatorAndStillAnswers) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  // A slow heartbeat: this fake coordinator never sends one, and the worker
  // must not give up on it while the garbage flows.
  WorkerThread worker(context, endpoint, "sim:v100", /*heartbeat=*/5s);
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value());
  std::mt19937 random(11);
  for (int i = 0; i < 3000; ++i) {
    std::string bytes(random() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    coordinator.Send(bytes);
  }
  const ZooStages stages = StagesOf("squeezenet", 1);
  schema::StageQuery query{424242, 1, MeasureSettings{}, stages.specs[0]};
  coordinator.Send(query);
  auto result = coordinator.ReceiveA<schema::StageResult>(5s);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->query_id, 424242u);
  EXPECT_TRUE(result->result.ok());
  EXPECT_EQ(worker.worker().counters().measured, 1);
}

TEST(FarmTest, WorkerMeetingAnotherProtocolVersionWaitsAndReconnectsInsteadOfExiting) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  WorkerThread worker(context, endpoint, "sim:v100");
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value());
  coordinator.Send(schema::EncodeWithVersion(schema::Heartbeat{50}, schema::kProtocolVersion + 1));
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value()) << "a new connection's hello";
  EXPECT_EQ(worker.worker().counters().connects, 2);
}

TEST(FarmTest, WorkerReconnectsToARestartedCoordinatorAndServesIt) {
  const ZooStages stages = StagesOf("squeezenet", 10);
  net::Context context;
  FarmOptions options = LoopbackOptions(0);
  std::string endpoint;
  std::unique_ptr<WorkerThread> worker;
  {
    auto first = Farm::Start(options);
    endpoint = first->BoundEndpoint();
    worker = std::make_unique<WorkerThread>(context, endpoint, "sim:v100");
    MeasureEach(*first, stages.pointers);
  }
  options.bind = endpoint;  // the same port, as a restarted coordinator would
  auto second = Farm::Start(options);
  for (const MeasureResult& r : MeasureEach(*second, stages.pointers)) EXPECT_TRUE(r.ok());
  EXPECT_GE(worker->worker().counters().connects, 2);
  EXPECT_EQ(worker->worker().counters().measured, 20);
}

// Issue 7 item 3: a worker that can read a query's id but refuses the
// query answers that id with an error; it never stays silent.
TEST(FarmTest, WorkerAnswersAQueryItRefusesWithAnErrorForItsId) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  WorkerThread worker(context, endpoint, "sim:v100", /*heartbeat=*/5s);
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value());
  const ZooStages stages = StagesOf("squeezenet", 6);
  uint64_t id = 9000;
  for (const BeyondTheLimits& c : kBeyondTheLimits) {
    StageSpec spec = OneConvStage(stages);
    c.edit(spec);
    coordinator.Send(schema::EncodeQuery(++id, spec, 1, MeasureSettings{}));
    const auto result = coordinator.ReceiveA<schema::StageResult>(5s);
    ASSERT_TRUE(result.has_value()) << c.name << ": no answer";
    EXPECT_EQ(result->query_id, id) << c.name;
    EXPECT_EQ(result->result.error, MeasureError::kUnsupported) << c.name;
    EXPECT_NE(result->result.error_message.find(c.expected), std::string::npos)
        << result->result.error_message;
  }
  // Within the budgets but inconsistent: refused as well, and answered.
  StageSpec inconsistent = OneConvStage(stages);
  inconsistent.groups[0][0].output.c += 1;
  coordinator.Send(schema::EncodeQuery(++id, inconsistent, 1, MeasureSettings{}));
  const auto result = coordinator.ReceiveA<schema::StageResult>(5s);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->query_id, id);
  EXPECT_EQ(result->result.error, MeasureError::kUnsupported);
  EXPECT_NE(result->result.error_message.find("output"), std::string::npos)
      << result->result.error_message;
  EXPECT_EQ(worker.worker().counters().measured, 0);
}

// A backend whose device is lost at its first measurement (as the cuda
// backend is by a sticky CUDA error).
class LosingBackend final : public devices::Backend {
 public:
  const DeviceInfo& Device() const override { return sim_->Device(); }
  MeasureResult Measure(const StageSpec&, int, const MeasureSettings&) override {
    lost_ = true;
    MeasureResult result;
    result.error = MeasureError::kBackendFailure;
    result.error_message = "cuda: an illegal address (recorded)";
    return result;
  }
  bool Lost() const override { return lost_; }

 private:
  std::unique_ptr<devices::Backend> sim_ = devices::BuiltinRegistry().OpenBackend("sim:v100");
  bool lost_ = false;
};

// Issue 10: a worker whose device is lost answers the query that met it,
// then stops with an error (ios-worker exits non-zero) instead of taking
// more queries it can only fail.
TEST(FarmTest, AWorkerWhoseDeviceIsLostAnswersThenStopsWithAnError) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  worker::WorkerOptions options;
  options.endpoint = coordinator.BindLoopback();
  options.worker_id = "losing";
  options.heartbeat = 50ms;
  worker::Worker worker(context, std::make_unique<LosingBackend>(), options);
  std::atomic<bool> done{false};
  std::string error;
  std::jthread thread([&](std::stop_token stop) {
    try {
      worker.Run(stop);
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value());
  const ZooStages stages = StagesOf("squeezenet", 6);
  coordinator.Send(schema::EncodeQuery(77, OneConvStage(stages), 1, MeasureSettings{}));
  const auto result = coordinator.ReceiveA<schema::StageResult>(5s);
  ASSERT_TRUE(result.has_value()) << "the query that met the loss is still answered";
  EXPECT_EQ(result->query_id, 77u);
  EXPECT_EQ(result->result.error, MeasureError::kBackendFailure);
  for (int i = 0; i < 100 && !done; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(done) << "the worker went on after losing its device";
  EXPECT_NE(error.find("the device was lost"), std::string::npos) << error;
  EXPECT_NE(error.find("illegal address"), std::string::npos) << error;
}

// Issue 10: a worker's hello carries its device's figures as properties
// (what its fingerprint lists: for cuda the GPU, compute capability, SMs,
// memory, clocks, driver, runtime and cuDNN versions, math mode).
TEST(FarmTest, AWorkersHelloListsItsDevicesFiguresAsProperties) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  WorkerThread worker(context, endpoint, "sim:a100", /*heartbeat=*/5s);
  const auto hello = coordinator.ReceiveA<schema::Hello>(5s);
  ASSERT_TRUE(hello.has_value());
  std::map<std::string, std::string> properties(hello->properties.begin(), hello->properties.end());
  EXPECT_EQ(properties["gpu"], "a100");
  EXPECT_EQ(properties["sm"], "108");
  EXPECT_EQ(properties["launch_us"], "4");
  EXPECT_FALSE(properties["pid"].empty());
}

// Issue 7 item 9a: a worker keeps one routing id for its life, so the
// coordinator knows a new connection of it for what it is.
TEST(FarmTest, WorkerKeepsOneRoutingIdAcrossConnections) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  WorkerThread worker(context, endpoint, "sim:v100");
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value());
  const std::string first = coordinator.last_peer();
  // Another protocol version makes the worker start a new connection.
  coordinator.Send(schema::EncodeWithVersion(schema::Heartbeat{50}, schema::kProtocolVersion + 1));
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value()) << "a new connection's hello";
  EXPECT_EQ(worker.worker().counters().connects, 2);
  EXPECT_EQ(coordinator.last_peer(), first);
  EXPECT_NE(first.find("thread-sim:v100"), std::string::npos) << first;
}

// Issue 7 item 9a, the worker's half: queries it holds survive a lost
// connection and are answered on the next one (they used to be dropped).
TEST(FarmTest, WorkerKeepsWhatItHoldsWhenItsCoordinatorGoesQuietAndAnswersOnTheNextConnection) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  // This coordinator never sends a heartbeat: the worker gives each
  // connection up after 3 x 50 ms, while every measurement takes 300 ms.
  WorkerThread worker(context, endpoint, "sim:v100", /*heartbeat=*/50ms, /*sim_delay_ms=*/300);
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(5s).has_value());
  const std::string routing_id = coordinator.last_peer();
  const ZooStages stages = StagesOf("squeezenet", 3);
  std::set<uint64_t> sent;
  for (size_t i = 0; i < stages.specs.size(); ++i) {
    sent.insert(500 + i);
    coordinator.Send(schema::StageQuery{500 + i, 1, MeasureSettings{}, stages.specs[i]});
  }
  std::set<uint64_t> answered;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (answered.size() < sent.size() && std::chrono::steady_clock::now() < deadline) {
    if (auto result = coordinator.ReceiveA<schema::StageResult>(1s)) {
      EXPECT_TRUE(result->result.ok()) << result->result.error_message;
      EXPECT_EQ(coordinator.last_peer(), routing_id) << "answered as the same worker";
      answered.insert(result->query_id);
    }
  }
  EXPECT_EQ(answered, sent);
  EXPECT_GE(worker.worker().counters().connects, 2) << "the answers came over new connections";
  EXPECT_EQ(worker.worker().counters().dropped, 0);
}

}  // namespace
}  // namespace ios::farm_testing
