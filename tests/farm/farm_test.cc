// The farm in one process: embedded workers over inproc://, real
// ios::worker::Worker threads over loopback TCP, and hand-driven fake peers
// that misbehave on purpose. Every wait is bounded.
#include <future>
#include <random>
#include <thread>

#include "common/error.h"
#include "tests/coordinator/search_testing.h"
#include "tests/farm/farm_testing.h"
#include "worker/farm_worker.h"

namespace ios::farm_testing {
namespace {

// A Worker on its own thread, stopped and joined when the object goes.
class WorkerThread {
 public:
  WorkerThread(net::Context& context, const std::string& endpoint, const std::string& backend,
               std::chrono::milliseconds heartbeat = 50ms) {
    worker::WorkerOptions options;
    options.endpoint = endpoint;
    options.worker_id = "thread-" + backend;
    options.heartbeat = heartbeat;
    options.reconnect_min = 20ms;
    options.reconnect_max = 100ms;
    worker_ = std::make_unique<worker::Worker>(context, worker::CreateBackend(backend), options);
    thread_ = std::jthread([this](std::stop_token stop) { worker_->Run(stop); });
  }
  ~WorkerThread() {
    thread_.request_stop();
    thread_.join();
  }
  const worker::Worker& worker() const { return *worker_; }

 private:
  std::unique_ptr<worker::Worker> worker_;
  std::jthread thread_;
};

const coordinator::WorkerReport* FindReport(const std::vector<coordinator::WorkerReport>& reports,
                                            const std::string& id) {
  for (const auto& r : reports) {
    if (r.worker_id == id) return &r;
  }
  return nullptr;
}

TEST(FarmTest, EmbeddedWorkersAnswerEveryStageOnceWithTheBackendsOwnFigures) {
  const ZooStages stages = StagesOf("squeezenet");
  FarmOptions options = FastOptions();
  options.local_workers = 3;
  options.min_workers = 3;
  auto farm = Farm::Start(options);
  const std::vector<MeasureResult> results = MeasureEach(*farm, stages.pointers);
  auto direct = worker::CreateBackend("sim:v100");
  ASSERT_EQ(results.size(), stages.specs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const MeasureResult expected = direct->Measure(stages.specs[i], 1, MeasureSettings{});
    EXPECT_EQ(results[i].median_ms, expected.median_ms) << stages.specs[i].Describe();
    EXPECT_EQ(results[i].error, expected.error);
  }
  int64_t answered = 0;
  for (const auto& report : farm->Workers()) answered += report.answered;
  EXPECT_EQ(answered, static_cast<int64_t>(stages.specs.size()));
  EXPECT_EQ(farm->Device().name, "sim:v100");
}

TEST(FarmTest, SearchThroughTheFarmFindsTheSameScheduleAsInProcessMeasurement) {
  const Graph graph = BuildZooModel("squeezenet");
  const auto options = coordinator::testing::DefaultOptions();
  auto local_store = db::ProfileStore::Open(":memory:");
  coordinator::testing::CountingMeasurer local;
  const auto expected = coordinator::RunSearch(graph, "squeezenet", options, *local_store, local);

  FarmOptions farm_options = FastOptions();
  farm_options.local_workers = 2;
  auto farm = Farm::Start(farm_options);
  auto farm_store = db::ProfileStore::Open(":memory:");
  const auto found = coordinator::RunSearch(graph, "squeezenet", options, *farm_store, *farm);
  EXPECT_EQ(coordinator::testing::StagesOf(found.ios),
            coordinator::testing::StagesOf(expected.ios));
  EXPECT_DOUBLE_EQ(found.ios.latency_ms, expected.ios.latency_ms);
  EXPECT_EQ(found.table.stats.measured, expected.table.stats.measured);
  EXPECT_EQ(farm_store->GetStats().measurements, local_store->GetStats().measurements);
}

TEST(FarmTest, WorkerOfAnotherDeviceClassGetsNoQueries) {
  const ZooStages stages = StagesOf("squeezenet", 60);
  FarmOptions options = LoopbackOptions(1);
  auto farm = Farm::Start(options);
  net::Context context;
  WorkerThread k80(context, farm->BoundEndpoint(), "sim:k80");
  // Let the K80 join before the search starts, so it could have taken work.
  for (int i = 0; i < 200 && farm->Workers().size() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(farm->Workers().size(), 2u);
  MeasureEach(*farm, stages.pointers);
  EXPECT_EQ(k80.worker().counters().measured, 0);
  const auto* report = FindReport(farm->Workers(), "thread-sim:k80");
  ASSERT_NE(report, nullptr);
  EXPECT_FALSE(report->matches);
  EXPECT_EQ(report->answered, 0);
  EXPECT_EQ(farm->ActiveWorkers(), 1);
}

TEST(FarmTest, SilentWorkerIsDeclaredLostAndItsQueriesAreMeasuredElsewhere) {
  const ZooStages stages = StagesOf("squeezenet", 40);
  FarmOptions options = LoopbackOptions(1);
  options.min_workers = 2;
  auto farm = Farm::Start(options);
  net::Context context;
  Peer hung = Peer::FakeWorker(context, *farm, /*capacity=*/8);  // then never a word again
  const std::vector<MeasureResult> results = MeasureEach(*farm, stages.pointers);
  for (const MeasureResult& r : results) EXPECT_TRUE(r.ok()) << r.error_message;
  const auto* report = FindReport(farm->Workers(), "fake");
  ASSERT_NE(report, nullptr);
  EXPECT_GT(report->requeued, 0) << "the hung worker was given work and it went elsewhere";
  EXPECT_FALSE(report->connected);
  EXPECT_EQ(report->answered, 0);
}

TEST(FarmTest, QueryUnansweredByALiveWorkerIsRetriedThenStoredAsATimeout) {
  const ZooStages stages = StagesOf("squeezenet", 3);
  FarmOptions options = LoopbackOptions(0);
  options.query_timeout = 200ms;
  options.max_attempts = 2;
  auto farm = Farm::Start(options);
  net::Context context;
  Peer stuck = Peer::FakeWorker(context, *farm, /*capacity=*/8);
  auto measuring =
      std::async(std::launch::async, [&] { return MeasureEach(*farm, stages.pointers); });
  int queries = 0;
  // Alive (heartbeats) but never answering, until the farm gives up.
  while (measuring.wait_for(30ms) != std::future_status::ready) {
    stuck.Send(schema::Heartbeat{50});
    while (auto message = stuck.Receive(1ms)) {
      queries += std::holds_alternative<schema::StageQuery>(*message);
    }
  }
  const std::vector<MeasureResult> results = measuring.get();
  EXPECT_EQ(queries, 6) << "each of 3 queries sent twice";
  for (const MeasureResult& r : results) {
    EXPECT_EQ(r.error, MeasureError::kTimeout);
    EXPECT_NE(r.error_message.find("after 2 attempts"), std::string::npos) << r.error_message;
  }
}

TEST(FarmTest, DuplicateAndUnknownResultsAreIgnored) {
  const ZooStages stages = StagesOf("squeezenet", 5);
  FarmOptions options = LoopbackOptions(0);
  auto farm = Farm::Start(options);
  net::Context context;
  Peer twice = Peer::FakeWorker(context, *farm, /*capacity=*/8);
  auto measuring =
      std::async(std::launch::async, [&] { return MeasureEach(*farm, stages.pointers); });
  twice.Send(schema::StageResult{12345, {}});  // an id it never sent
  while (measuring.wait_for(5ms) != std::future_status::ready) {
    if (auto query = twice.ReceiveA<schema::StageQuery>(20ms)) {
      MeasureResult result;
      result.median_ms = 1.5;
      twice.Send(schema::StageResult{query->query_id, result});
      twice.Send(schema::StageResult{query->query_id, result});
    }
  }
  const auto results = measuring.get();  // MeasureEach checks "exactly once"
  for (const MeasureResult& r : results) EXPECT_EQ(r.median_ms, 1.5);
  // Give the farm a moment to see the last duplicate.
  const coordinator::WorkerReport* report = nullptr;
  for (int i = 0; i < 100; ++i) {
    report = FindReport(farm->Workers(), "fake");
    if (report != nullptr && report->late >= 5) break;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->answered, 5);
  EXPECT_GE(report->late, 5);
}

TEST(FarmTest, ConsumerThatThrowsLeavesTheFarmReadyForTheNextBatch) {
  FarmOptions options = FastOptions();
  options.local_workers = 2;
  auto farm = Farm::Start(options);
  {
    // Destroyed right after the throw: the farm must not touch them again.
    const ZooStages doomed = StagesOf("squeezenet", 50);
    EXPECT_THROW(farm->MeasureAll(doomed.pointers, 1, MeasureSettings{},
                                  [](std::span<const coordinator::IndexedResult>) {
                                    throw std::runtime_error("disk full");
                                  }),
                 std::runtime_error);
  }
  const ZooStages stages = StagesOf("squeezenet", 30);
  for (const MeasureResult& r : MeasureEach(*farm, stages.pointers)) EXPECT_TRUE(r.ok());
}

TEST(FarmTest, WaitingForWorkersThatDoNotComeFailsWithAClearMessage) {
  FarmOptions options = LoopbackOptions(1);
  options.min_workers = 3;
  options.wait_for_workers = 300ms;
  auto farm = Farm::Start(options);
  const ZooStages stages = StagesOf("squeezenet", 2);
  try {
    MeasureEach(*farm, stages.pointers);
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("only 1 of 3 workers"), std::string::npos) << message;
    EXPECT_NE(message.find("ios-worker --connect"), std::string::npos) << message;
  }
}

TEST(FarmTest, PeerSpeakingAnotherProtocolVersionIsRefused) {
  FarmOptions options = LoopbackOptions(1);
  auto farm = Farm::Start(options);
  net::Context context;
  Peer future(context, zmq::socket_type::dealer);
  future.Connect(farm->BoundEndpoint());
  future.Send(schema::EncodeWithVersion(schema::Heartbeat{50}, schema::kProtocolVersion + 1));
  auto reject = future.ReceiveA<schema::Reject>(2s);
  ASSERT_TRUE(reject.has_value());
  EXPECT_EQ(reject->reason, schema::RejectReason::kVersionMismatch);
}

TEST(FarmTest, GarbageFromPeersNeitherCrashesNorDisturbsTheFarm) {
  FarmOptions options = LoopbackOptions(1);
  auto farm = Farm::Start(options);
  net::Context context;
  Peer vandal(context, zmq::socket_type::dealer);
  vandal.Connect(farm->BoundEndpoint());
  std::mt19937 random(7);
  schema::Hello hello;
  hello.worker_id = "truncated";
  hello.device = worker::CreateBackend("sim:v100")->Device();
  const std::string valid = schema::Encode(hello);
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    if (i % 3 == 0) {
      bytes = valid.substr(0, random() % valid.size());  // truncated
    } else {
      bytes.resize(random() % 200);
      for (char& c : bytes) c = static_cast<char>(random());
      if (i % 3 == 2 && bytes.size() >= 8) bytes.replace(0, 8, valid.substr(0, 8));
    }
    if (i % 100 == 0) {  // a multi-frame message
      vandal.socket().send(zmq::buffer(bytes), zmq::send_flags::sndmore);
    }
    vandal.Send(bytes);
  }
  int rejects = 0;
  while (vandal.ReceiveA<schema::Reject>(200ms)) ++rejects;
  EXPECT_GT(rejects, 100) << "bad messages are answered with a reject";
  const ZooStages stages = StagesOf("squeezenet", 20);
  for (const MeasureResult& r : MeasureEach(*farm, stages.pointers)) EXPECT_TRUE(r.ok());
}

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

}  // namespace
}  // namespace ios::farm_testing
