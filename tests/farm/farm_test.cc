// The farm in one process: embedded workers over inproc://, real
// ios::worker::Worker threads over loopback TCP, and hand-driven fake peers
// that misbehave on purpose. Every wait is bounded. A real worker against a
// hand-driven coordinator: farm_worker_test.cc.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "common/error.h"
#include "tests/coordinator/search_testing.h"
#include "tests/farm/farm_testing.h"
#include "tests/farm/farm_worker_testing.h"

namespace ios::farm_testing {
namespace {

// A logger sink that holds the thread logging a message containing
// `trigger` until Release(): a way to stall the farm's router thread at a
// known point.
class StallingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit StallingSink(std::string trigger) : trigger_(std::move(trigger)) {}
  //! Whether a thread got stuck on the trigger within `timeout`.
  bool WaitUntilStalled(std::chrono::milliseconds timeout) {
    std::unique_lock lock(state_mutex_);
    return changed_.wait_for(lock, timeout, [&] { return stalled_; });
  }
  void Release() {
    {
      std::lock_guard lock(state_mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (std::string_view(msg.payload.data(), msg.payload.size()).find(trigger_) ==
        std::string_view::npos) {
      return;
    }
    std::unique_lock lock(state_mutex_);
    stalled_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
  }
  void flush_() override {}

 private:
  const std::string trigger_;
  std::mutex state_mutex_;
  std::condition_variable changed_;
  bool stalled_ = false, released_ = false;
};

// Installs `sink` as the default logger's only sink for the object's life.
class ScopedLogger {
 public:
  explicit ScopedLogger(std::shared_ptr<spdlog::sinks::sink> sink)
      : previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("farm-test", std::move(sink)));
  }
  ~ScopedLogger() { spdlog::set_default_logger(previous_); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
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
  auto direct = devices::BuiltinRegistry().OpenBackend("sim:v100");
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

// A queue shorter than the workers' credit (embedded workers take 8 each)
// is handed out one per worker in turn, not all to the first worker: a lazy
// search's rounds are short, and must not serialise the farm.
TEST(FarmTest, AShortQueueIsSpreadOverEveryWorker) {
  const ZooStages stages = StagesOf("squeezenet", 8);
  FarmOptions options = FastOptions();
  options.local_workers = 4;
  options.local_backend_options.sim_delay_ms = 20;  // all 8 are outstanding at once
  auto farm = Farm::Start(options);
  farm->WaitForWorkers();
  for (int i = 0; i < 200 && farm->Workers().size() < 4; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(farm->Workers().size(), 4u);
  MeasureEach(*farm, stages.pointers);
  for (const coordinator::WorkerReport& report : farm->Workers()) {
    EXPECT_EQ(report.answered, 2) << report.worker_id;
  }
}

// Lazy measurement through the farm: stages are added to the running batch
// as results arrive; four workers find the schedule measuring everything
// finds, and no stage is measured twice.
TEST(FarmTest, LazySearchThroughTheFarmFindsTheExhaustiveSchedule) {
  const Graph graph = BuildZooModel("inception_v3");
  const auto all_options = coordinator::testing::DefaultOptions();
  auto all_store = db::ProfileStore::Open(":memory:");
  coordinator::testing::CountingMeasurer all;
  const auto expected = coordinator::RunSearch(graph, "inception_v3", all_options, *all_store, all);

  coordinator::SearchOptions lazy_options = all_options;
  lazy_options.measure = coordinator::MeasureMode::kLazy;
  FarmOptions farm_options = FastOptions();
  farm_options.local_workers = 4;
  auto farm = Farm::Start(farm_options);
  auto farm_store = db::ProfileStore::Open(":memory:");
  const auto found =
      coordinator::RunSearch(graph, "inception_v3", lazy_options, *farm_store, *farm);
  EXPECT_EQ(coordinator::testing::StagesOf(found.ios),
            coordinator::testing::StagesOf(expected.ios));
  EXPECT_DOUBLE_EQ(found.ios.latency_ms, expected.ios.latency_ms);
  EXPECT_LT(found.table.stats.measured, expected.table.stats.measured / 2);
  // Every result stored once: as many rows as stages measured.
  EXPECT_EQ(farm_store->GetStats().measurements, found.table.stats.measured);
  int64_t answered = 0;
  for (const coordinator::WorkerReport& report : farm->Workers()) answered += report.answered;
  EXPECT_EQ(answered, found.table.stats.measured) << "no stage measured twice";
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
  const auto reports = farm->Workers();  // FindReport points into it
  const auto* report = FindReport(reports, "thread-sim:k80");
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
  const auto reports = farm->Workers();  // FindReport points into it
  const auto* report = FindReport(reports, "fake");
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

// What a lazy search fills its rounds to (docs/search-cost.md): the
// serving workers' capacities summed, a lost worker's taken back.
TEST(FarmTest, CreditIsTheServingWorkersCapacitiesSummed) {
  FarmOptions options = LoopbackOptions(2);
  options.min_workers = 2;
  auto farm = Farm::Start(options);
  farm->WaitForWorkers();
  EXPECT_EQ(farm->Credit(), 16) << "8 per embedded worker";
  const auto wait_for_credit = [&](int credit) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (farm->Credit() != credit && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return farm->Credit();
  };
  {
    net::Context context;
    Peer peer = Peer::FakeWorker(context, *farm, /*capacity=*/3);
    EXPECT_EQ(wait_for_credit(19), 19) << "a worker of capacity 3 joined";
  }
  // Gone without a word: lost after its heartbeats stop.
  EXPECT_EQ(wait_for_credit(16), 16) << "the lost worker's credit taken back";
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
  std::vector<coordinator::WorkerReport> reports;
  const coordinator::WorkerReport* report = nullptr;  // into `reports`
  for (int i = 0; i < 100; ++i) {
    reports = farm->Workers();
    report = FindReport(reports, "fake");
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
  hello.device = devices::BuiltinRegistry().OpenBackend("sim:v100")->Device();
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

// Issue 7 item 1: a backend that cannot be made is an error, thrown before
// any thread starts (it used to unwind a running std::thread: abort).
TEST(FarmTest, StartWithAnUnknownBackendThrowsInsteadOfAborting) {
  for (const char* backend : {"v100", "cuda", "cpu,threads=x", "sim", "", "sim:nope"}) {
    FarmOptions options = FastOptions();
    options.local_workers = 2;
    options.local_backend = backend;
    options.device = backend;
    EXPECT_THROW(Farm::Start(options), Error) << "backend '" << backend << "'";
  }
  FarmOptions options = FastOptions();
  options.bind = "tcp://127.0.0.1:99999";
  EXPECT_THROW(Farm::Start(options), Error);
}

// Issue 7 item 3: a stage no worker accepts is answered at once, locally,
// as unsupported: never sent, never retried, never a timeout.
TEST(FarmTest, StageBeyondTheWireLimitsIsAnsweredUnsupportedWithoutReachingAWorker) {
  const ZooStages valid = StagesOf("squeezenet", 6);
  std::vector<StageSpec> refused;
  for (const BeyondTheLimits& c : kBeyondTheLimits) {
    refused.push_back(OneConvStage(valid));
    c.edit(refused.back());
  }
  std::vector<const StageSpec*> specs;
  for (size_t i = 0; i < valid.specs.size(); ++i) {
    specs.push_back(&valid.specs[i]);
    if (i < refused.size()) specs.push_back(&refused[i]);
  }
  FarmOptions options = FastOptions();
  options.local_workers = 1;
  options.max_attempts = 1;
  auto farm = Farm::Start(options);
  const std::vector<MeasureResult> results = MeasureEach(*farm, specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto bad = std::find(specs.begin(), specs.end(), specs[i]) - specs.begin();
    const auto refused_index = std::find_if(refused.begin(), refused.end(),
                                            [&](const StageSpec& r) { return &r == specs[i]; });
    if (refused_index == refused.end()) {
      EXPECT_TRUE(results[i].ok()) << results[i].error_message;
      continue;
    }
    const BeyondTheLimits& c = kBeyondTheLimits[refused_index - refused.begin()];
    EXPECT_EQ(results[i].error, MeasureError::kUnsupported) << c.name << " (#" << bad << ")";
    EXPECT_NE(results[i].error_message.find(c.expected), std::string::npos)
        << c.name << ": " << results[i].error_message;
  }
  int64_t answered = 0, requeued = 0;
  for (const auto& report : farm->Workers()) {
    answered += report.answered;
    requeued += report.requeued;
  }
  EXPECT_EQ(answered, static_cast<int64_t>(valid.specs.size())) << "only valid stages are sent";
  EXPECT_EQ(requeued, 0);
}

// Issue 7 item 9a: the same worker session on a new connection keeps the
// queries it holds, and its answers sent there count: nothing re-queued.
TEST(FarmTest, WorkerSessionOnANewConnectionKeepsItsQueriesAndItsAnswersCount) {
  const ZooStages stages = StagesOf("squeezenet", 4);
  FarmOptions options = LoopbackOptions(0);
  options.heartbeat = 2s;  // the fake worker sends none: no loss while the test runs
  auto farm = Farm::Start(options);
  net::Context context;
  const std::string routing_id = "w-test-session";
  auto connect = [&] {
    auto peer = std::make_unique<Peer>(context, zmq::socket_type::dealer);
    peer->socket().set(zmq::sockopt::routing_id, routing_id);
    peer->Connect(farm->BoundEndpoint());
    peer->SendHello("sim:v100", /*capacity=*/4, /*heartbeat_ms=*/2000);
    return peer;
  };
  auto first = connect();
  auto measuring =
      std::async(std::launch::async, [&] { return MeasureEach(*farm, stages.pointers); });
  std::vector<uint64_t> held;
  while (held.size() < 4) {
    auto query = first->ReceiveA<schema::StageQuery>(5s);
    ASSERT_TRUE(query.has_value()) << "got " << held.size() << " of 4 queries";
    held.push_back(query->query_id);
  }
  first.reset();  // the connection is gone, the session goes on
  auto second = connect();
  MeasureResult answer;
  answer.median_ms = 2.5;
  for (uint64_t id : held) second->Send(schema::StageResult{id, answer});
  const std::vector<MeasureResult> results = measuring.get();
  for (const MeasureResult& r : results) EXPECT_EQ(r.median_ms, 2.5);
  const auto reports = farm->Workers();
  ASSERT_EQ(reports.size(), 1u) << "one session, one report";
  EXPECT_EQ(reports[0].answered, 4);
  EXPECT_EQ(reports[0].requeued, 0);
  EXPECT_TRUE(reports[0].connected);
  while (auto message = second->Receive(1ms)) {
    EXPECT_FALSE(std::holds_alternative<schema::StageQuery>(*message)) << "a query sent twice";
  }
}

// Issue 7 item 9b: the router owns what it sends. Stalled (here: inside a
// log call) while the caller's MeasureAll ends and the caller changes its
// specs, it still sends only the stages it was given, and MeasureAll does
// not wait for it.
TEST(FarmTest, StalledRouterSendsNothingOfSpecsChangedAfterMeasureAllReturned) {
  ZooStages stages = StagesOf("squeezenet", 20);
  std::set<std::string> given;
  for (const StageSpec& spec : stages.specs) given.insert(spec.Key());
  std::vector<StageSpec> others;
  for (const StageSpec& spec : StagesOf("inception_v3", 400).specs) {
    if (!given.contains(spec.Key())) others.push_back(spec);
    if (others.size() == stages.specs.size()) break;
  }
  ASSERT_EQ(others.size(), stages.specs.size());

  auto sink = std::make_shared<StallingSink>("dropped a bad message");
  ScopedLogger logger(sink);
  FarmOptions options = LoopbackOptions(0);
  options.heartbeat = 2s;
  auto farm = Farm::Start(options);
  net::Context context;
  Peer fake = Peer::FakeWorker(context, *farm, /*capacity=*/2);
  auto measuring = std::async(std::launch::async, [&] {
    try {
      farm->MeasureAll(stages.pointers, 1, MeasureSettings{},
                       [](std::span<const coordinator::IndexedResult>) {
                         throw std::runtime_error("consumer failed");
                       });
    } catch (const std::runtime_error&) {
    }
  });
  std::vector<uint64_t> held;
  while (held.size() < 2) {
    const auto query = fake.ReceiveA<schema::StageQuery>(5s);
    ASSERT_TRUE(query.has_value());
    EXPECT_TRUE(given.contains(query->stage.Key()));
    held.push_back(query->query_id);
  }
  MeasureResult answer;
  answer.median_ms = 1.0;
  // The first answer reaches the consumer (which throws); the router stalls
  // on the bad message and reads the second answer, which frees credit for
  // more queries, only once it is released.
  fake.Send(schema::StageResult{held[0], answer});
  fake.Send(std::string(8, 'x'));
  fake.Send(schema::StageResult{held[1], answer});
  const bool stalled = sink->WaitUntilStalled(10s);
  if (!stalled) sink->Release();
  ASSERT_TRUE(stalled) << "the router never logged the bad message";
  measuring.get();  // returns although the router has not read the close

  for (size_t i = 0; i < stages.specs.size(); ++i) stages.specs[i] = others[i];
  sink->Release();
  while (auto message = fake.Receive(300ms)) {
    if (auto* sent = std::get_if<schema::StageQuery>(&*message)) {
      EXPECT_TRUE(given.contains(sent->stage.Key())) << "sent a stage changed after the call";
    }
  }
}

// The search holds results back to commit them a few times a second; a
// batch whose workers go quiet hands it an empty delivery, so what it holds
// is committed while the rest is still being measured.
TEST(FarmTest, AQuietBatchHandsItsCallerAnEmptyDelivery) {
  const ZooStages stages = StagesOf("squeezenet", 2);
  FarmOptions options = LoopbackOptions(0);
  options.heartbeat = 2s;
  auto farm = Farm::Start(options);
  net::Context context;
  Peer fake = Peer::FakeWorker(context, *farm, /*capacity=*/1);
  size_t results = 0, empty = 0;
  auto measuring = std::async(std::launch::async, [&] {
    farm->MeasureAll(stages.pointers, 1, MeasureSettings{},
                     [&](std::span<const coordinator::IndexedResult> arrived) {
                       results += arrived.size();
                       if (arrived.empty()) ++empty;
                     });
  });
  MeasureResult answer;
  answer.median_ms = 1.0;
  for (int i = 0; i < 2; ++i) {
    const auto query = fake.ReceiveA<schema::StageQuery>(5s);
    ASSERT_TRUE(query.has_value());
    if (i == 1) std::this_thread::sleep_for(2s);  // four times the quiet spell
    fake.Send(schema::StageResult{query->query_id, answer});
  }
  measuring.get();
  EXPECT_EQ(results, 2u);
  EXPECT_GE(empty, 1u);
}

// Issue 7 item 9b, as a stress for the sanitizer builds: batches ended by a
// throwing consumer, their specs freed at once, leave nothing behind for the
// next batch (no result of theirs, no read of freed specs).
TEST(FarmTest, ManyBatchesEndedByAThrowingConsumerLeaveNothingBehind) {
  FarmOptions options = FastOptions();
  options.local_workers = 2;
  auto farm = Farm::Start(options);
  const ZooStages source = StagesOf("squeezenet", 60);
  for (int round = 0; round < 30; ++round) {
    auto specs = std::make_unique<std::vector<StageSpec>>(source.specs);
    std::vector<const StageSpec*> pointers;
    for (const StageSpec& spec : *specs) pointers.push_back(&spec);
    EXPECT_THROW(farm->MeasureAll(pointers, 1 + round % 3, MeasureSettings{},
                                  [](std::span<const coordinator::IndexedResult>) {
                                    throw std::runtime_error("consumer failed");
                                  }),
                 std::runtime_error);
    specs.reset();
  }
  const ZooStages stages = StagesOf("squeezenet", 30);
  for (const MeasureResult& r : MeasureEach(*farm, stages.pointers)) EXPECT_TRUE(r.ok());
}

}  // namespace
}  // namespace ios::farm_testing
