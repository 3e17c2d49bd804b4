// Issue 21 bug 6: a measurement that never returns. The worker gives it up
// after a bound derived from the query's timeout, answers a typed timeout,
// and reports itself lost (ios-worker exits kExitMeasurementHung, and a
// supervisor restarts it); the coordinator logs it and measures the stage
// elsewhere. Every wait is bounded, and every hung backend is released
// before the test ends, so a failure never hangs the suite.
#include <gmock/gmock.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "coordinator/worker_process.h"
#include "devices/registry.h"
#include "tests/farm/farm_testing.h"
#include "tests/testing/binaries.h"
#include "tests/testing/child.h"
#include "tests/testing/process.h"
#include "worker/farm_worker.h"

namespace ios::farm_testing {
namespace {

using ::testing::HasSubstr;

// Holds the measurements a BlockingBackend hangs in until Release(), and
// tells when that backend has been destroyed (by the thread that was stuck
// in it, once released).
class Gate {
 public:
  void Release() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  //! Whether a measurement got stuck within `timeout`.
  bool WaitEntered(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return entered_ > 0; });
  }
  //! Whether the backend was destroyed within `timeout`.
  bool WaitGone(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return gone_; });
  }
  void Block() {
    std::unique_lock lock(mutex_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  void Gone() {
    std::lock_guard lock(mutex_);
    gone_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int entered_ = 0;
  bool open_ = false, gone_ = false;
};

// The simulator's first `answered` measurements, then every one blocks in
// the gate, as on a hung device.
class BlockingBackend final : public devices::Backend {
 public:
  BlockingBackend(std::shared_ptr<Gate> gate, int answered)
      : gate_(std::move(gate)), left_(answered) {}
  ~BlockingBackend() override { gate_->Gone(); }
  const DeviceInfo& Device() const override { return sim_->Device(); }
  MeasureResult Measure(const StageSpec& stage, int batch_size,
                        const MeasureSettings& settings) override {
    if (left_ > 0) {
      --left_;
    } else {
      gate_->Block();
    }
    return sim_->Measure(stage, batch_size, settings);
  }

 private:
  std::shared_ptr<Gate> gate_;
  int left_;
  std::unique_ptr<devices::Backend> sim_ = devices::BuiltinRegistry().OpenBackend("sim:v100");
};

// A Worker's Run on its own thread, with what it ended with.
class RunningWorker {
 public:
  RunningWorker(net::Context& context, std::unique_ptr<devices::Backend> backend,
                worker::WorkerOptions options, std::shared_ptr<Gate> gate)
      : gate_(std::move(gate)),
        worker_(std::make_unique<worker::Worker>(context, std::move(backend), options)) {
    thread_ = std::jthread([this](std::stop_token stop) {
      try {
        worker_->Run(stop);
      } catch (const worker::WorkerLost& e) {
        lost_ = e.cause();
        what_ = e.what();
      } catch (const std::exception& e) {
        what_ = e.what();
      }
      ended_.set_value();
    });
  }
  // Releases the gate first: a Run that never gave up must still end.
  ~RunningWorker() {
    gate_->Release();
    thread_.request_stop();
  }

  //! Whether Run ended within `timeout`; then lost() and what() say how.
  bool WaitEnded(std::chrono::milliseconds timeout) {
    return ended_future_.wait_for(timeout) == std::future_status::ready;
  }
  void Stop() { thread_.request_stop(); }
  std::optional<worker::WorkerLost::Cause> lost() const { return lost_; }
  const std::string& what() const { return what_; }
  worker::Worker& worker() { return *worker_; }
  //! Joins Run's thread (it must have ended) and destroys the Worker.
  void Destroy() {
    thread_.join();
    worker_.reset();
  }

 private:
  std::shared_ptr<Gate> gate_;
  std::unique_ptr<worker::Worker> worker_;
  std::optional<worker::WorkerLost::Cause> lost_;
  std::string what_;
  std::promise<void> ended_;
  std::future<void> ended_future_ = ended_.get_future();
  std::jthread thread_;  // last: started once the rest is there
};

worker::WorkerOptions FastWorker(const std::string& endpoint, const std::string& id) {
  worker::WorkerOptions options;
  options.endpoint = endpoint;
  options.worker_id = id;
  options.heartbeat = 50ms;
  options.reconnect_min = 20ms;
  options.reconnect_max = 100ms;
  options.announce = false;
  return options;
}

// Keeps every log line the default logger is given while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("hung-test", sink_);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(std::move(logger));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string Text() const { return sink_->Text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string Text() {
      std::lock_guard lock(mutex_);
      return text_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      text_.append(msg.payload.data(), msg.payload.size());
      text_ += '\n';
    }
    void flush_() override {}

   private:
    std::string text_;
  };
  std::shared_ptr<Sink> sink_ = std::make_shared<Sink>();
  std::shared_ptr<spdlog::logger> previous_;
};

struct BoundCase {
  uint32_t query_timeout_ms;
  std::chrono::milliseconds cap, expected;
};

TEST(HungMeasurementTest, TheBoundIsTheQueryTimeoutLessAMarginAtLeastAMinuteCappedByTheWorker) {
  const BoundCase cases[] = {
      {0, 0ms, 110000ms},       // no timeout said: the coordinator's default, 120 s, less 10 s
      {120000, 0ms, 110000ms},  // a quarter would be 30 s: the margin is at most 10 s
      {100000, 0ms, 90000ms},   // 10 s less
      {72000, 0ms, 62000ms},    // a quarter would be 18 s: 10 s less
      {2000, 0ms, 60000ms},     // a short query timeout: never below 60 s
      {1, 0ms, 60000ms},
      {2000, 300ms, 300ms},  // the worker's own cap is lower
      {1, 1ms, 1ms},         // never below 1 ms
      {200000, 5000ms, 5000ms},
      {100000, 95000ms, 90000ms},  // the query's bound is lower
  };
  for (const BoundCase& c : cases) {
    EXPECT_EQ(worker::MeasurementBound(c.query_timeout_ms, c.cap), c.expected)
        << c.query_timeout_ms << " ms, cap " << c.cap.count() << " ms";
  }
}

TEST(HungMeasurementTest, TheFarmSendsItsQueryTimeoutWithEveryQuery) {
  FarmOptions options = LoopbackOptions(0);
  options.query_timeout = 4321ms;
  auto farm = Farm::Start(options);
  net::Context context;
  Peer fake = Peer::FakeWorker(context, *farm, /*capacity=*/1);
  const ZooStages stages = StagesOf("squeezenet", 1);
  auto measuring =
      std::async(std::launch::async, [&] { return MeasureEach(*farm, stages.pointers); });
  const auto query = fake.ReceiveA<schema::StageQuery>(10s);
  ASSERT_TRUE(query.has_value());
  EXPECT_EQ(query->timeout_ms, 4321u);
  fake.Send(
      schema::StageResult{query->query_id, devices::BuiltinRegistry()
                                               .OpenBackend("sim:v100")
                                               ->Measure(query->stage, 1, MeasureSettings{})});
  EXPECT_TRUE(measuring.get().at(0).ok());
}

TEST(HungMeasurementTest, AWorkerAnswersAHungMeasurementWithATimeoutAndReportsItselfLost) {
  auto context = std::make_unique<net::Context>();
  Peer coordinator(*context, zmq::socket_type::router);
  auto gate = std::make_shared<Gate>();
  worker::WorkerOptions options = FastWorker(coordinator.BindLoopback(), "hanging");
  // Bound: 300 ms from the start of each measurement (a query's own timeout
  // gives at least kMinMeasurementBound, too long for a test).
  options.max_measurement = 300ms;
  RunningWorker running(*context, std::make_unique<BlockingBackend>(gate, 1), options, gate);
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(10s).has_value());
  const ZooStages stages = StagesOf("squeezenet", 3);
  for (uint64_t id : {71, 72, 73}) {
    coordinator.Send(schema::EncodeQuery(id, stages.specs.at(id - 71), 1, MeasureSettings{},
                                         /*timeout_ms=*/400));
  }
  const auto first = coordinator.ReceiveA<schema::StageResult>(10s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->query_id, 71u);
  EXPECT_TRUE(first->result.ok()) << first->result.error_message;
  const auto second = coordinator.ReceiveA<schema::StageResult>(10s);
  ASSERT_TRUE(second.has_value()) << "the hung measurement was never answered";
  EXPECT_EQ(second->query_id, 72u);
  EXPECT_EQ(second->result.error, MeasureError::kTimeout);
  EXPECT_THAT(second->result.error_message, HasSubstr("worker hanging"));
  EXPECT_THAT(second->result.error_message, HasSubstr("did not end within 0.3 s"));
  ASSERT_TRUE(running.WaitEnded(10s)) << "the worker went on after a hung measurement";
  EXPECT_EQ(running.lost(), worker::WorkerLost::Cause::kMeasurementHung) << running.what();
  EXPECT_THAT(running.what(), HasSubstr("a measurement hung"));
  EXPECT_EQ(running.worker().counters().measured, 1);
  EXPECT_EQ(running.worker().counters().failed, 1);
  // The worker and its context go while the measurement still hangs: the
  // abandoned thread holds neither, and touches neither once released.
  running.Destroy();
  coordinator.socket().close();
  context.reset();
  gate->Release();
  EXPECT_TRUE(gate->WaitGone(10s)) << "the abandoned thread never let its backend go";
}

TEST(HungMeasurementTest, AWorkerStoppedDuringAHungMeasurementEndsAfterTheBound) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  auto gate = std::make_shared<Gate>();
  worker::WorkerOptions options = FastWorker(coordinator.BindLoopback(), "stopping");
  options.max_measurement = 200ms;  // the query says no timeout: 110 s without the cap
  RunningWorker running(context, std::make_unique<BlockingBackend>(gate, 0), options, gate);
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(10s).has_value());
  const ZooStages stages = StagesOf("squeezenet", 1);
  coordinator.Send(schema::EncodeQuery(5, stages.specs.at(0), 1, MeasureSettings{}));
  ASSERT_TRUE(gate->WaitEntered(10s));
  running.Stop();
  ASSERT_TRUE(running.WaitEnded(10s)) << "a stop waited forever on a hung measurement";
  EXPECT_EQ(running.lost(), worker::WorkerLost::Cause::kMeasurementHung) << running.what();
  running.Destroy();
  gate->Release();
  EXPECT_TRUE(gate->WaitGone(10s));
}

TEST(HungMeasurementTest, ASearchFinishesWhenAWorkersMeasurementHangs) {
  const ZooStages stages = StagesOf("squeezenet", 12);
  FarmOptions options = LoopbackOptions(0);
  options.min_workers = 2;
  options.query_timeout = 60s;  // far: the worker's own bound comes first
  CapturedLog log;
  auto farm = Farm::Start(options);
  net::Context context;
  auto healthy_gate = std::make_shared<Gate>();
  RunningWorker healthy(context, devices::BuiltinRegistry().OpenBackend("sim:v100"),
                        FastWorker(farm->BoundEndpoint(), "healthy"), healthy_gate);
  auto gate = std::make_shared<Gate>();
  worker::WorkerOptions hanging_options = FastWorker(farm->BoundEndpoint(), "hanging");
  hanging_options.max_measurement = 300ms;
  RunningWorker hanging(context, std::make_unique<BlockingBackend>(gate, 0), hanging_options, gate);
  const std::vector<MeasureResult> results = MeasureEach(*farm, stages.pointers);
  for (const MeasureResult& r : results) EXPECT_TRUE(r.ok()) << r.error_message;
  ASSERT_TRUE(hanging.WaitEnded(10s)) << "the hanging worker never gave up";
  EXPECT_EQ(hanging.lost(), worker::WorkerLost::Cause::kMeasurementHung) << hanging.what();
  // The coordinator names the worker, the stage and the worker's reason.
  EXPECT_THAT(log.Text(), HasSubstr("worker hanging gave up measuring stage "));
  EXPECT_THAT(log.Text(), HasSubstr("did not end within 0.3 s"));
  const auto reports = farm->Workers();
  bool found = false;
  for (const auto& report : reports) {
    if (report.worker_id != "hanging") continue;
    found = true;
    EXPECT_EQ(report.failed, 1);
    EXPECT_GE(report.requeued, 1);
    EXPECT_FALSE(report.connected) << "a worker that gave up is dropped at once";
  }
  EXPECT_TRUE(found);
  hanging.Destroy();
  gate->Release();
  EXPECT_TRUE(gate->WaitGone(10s));
}

TEST(HungMeasurementTest, IosWorkerAnswersAHungMeasurementWithATimeoutAndExitsThree) {
  testing::TempDir dir("ios_hung_worker");
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  testing::ChildProcess worker(
      {testing::kWorker, "--connect", endpoint, "--id", "hanging", "--backend", "sim:v100",
       "--sim-hang-after", "1", "--max-measurement-ms", "750", "--heartbeat-ms", "100"},
      dir.path() / "worker.log");
  ASSERT_TRUE(worker.started());
  ASSERT_TRUE(coordinator.ReceiveA<schema::Hello>(15s).has_value())
      << testing::ReadFile(dir.path() / "worker.log");
  const ZooStages stages = StagesOf("squeezenet", 2);
  coordinator.Send(schema::EncodeQuery(1, stages.specs.at(0), 1, MeasureSettings{}, 1000));
  coordinator.Send(schema::EncodeQuery(2, stages.specs.at(1), 1, MeasureSettings{}, 1000));
  std::optional<schema::StageResult> timeout;
  for (int i = 0; i < 2; ++i) {
    auto result = coordinator.ReceiveA<schema::StageResult>(15s);
    ASSERT_TRUE(result.has_value()) << testing::ReadFile(dir.path() / "worker.log");
    if (result->query_id == 2) timeout = result;
  }
  ASSERT_TRUE(timeout.has_value());
  EXPECT_EQ(timeout->result.error, MeasureError::kTimeout);
  const std::optional<int> code = worker.Wait(15s);
  ASSERT_TRUE(code.has_value()) << "ios-worker went on after a hung measurement";
  EXPECT_EQ(*code, worker::kExitMeasurementHung) << testing::ReadFile(dir.path() / "worker.log");
  EXPECT_THAT(testing::ReadFile(dir.path() / "worker.log"), HasSubstr("a measurement hung"));
}

TEST(HungMeasurementTest, ASupervisedWorkerWhoseMeasurementHangsIsRestartedAndTheSearchEnds) {
  const ZooStages stages = StagesOf("squeezenet", 10);
  FarmOptions options = LoopbackOptions(0);
  options.query_timeout = 3s;
  CapturedLog log;
  auto farm = Farm::Start(options);
  auto supervised = std::make_unique<coordinator::SupervisedWorker>(
      testing::kWorker,
      std::vector<std::string>{"--connect", farm->BoundEndpoint(), "--id", "supervised",
                               "--backend", "sim:v100", "--sim-hang-after", "4",
                               "--max-measurement-ms", "2250", "--heartbeat-ms", "100",
                               "--log-level", "off"},
      /*max_restarts=*/10);
  auto measuring =
      std::async(std::launch::async, [&] { return MeasureEach(*farm, stages.pointers); });
  if (measuring.wait_for(60s) != std::future_status::ready) {
    ADD_FAILURE() << "the search stalled on a hung worker";
    // Without workers the farm gives up after wait_for_workers, ending the search.
    supervised.reset();
    EXPECT_THROW(measuring.get(), Error);
    return;
  }
  for (const MeasureResult& r : measuring.get()) EXPECT_TRUE(r.ok()) << r.error_message;
  EXPECT_GE(supervised->restarts(), 1);
  EXPECT_THAT(log.Text(), HasSubstr("worker supervised gave up measuring stage "));
  EXPECT_THAT(log.Text(), HasSubstr("exited with status 3 (a measurement hung)"));
}

}  // namespace
}  // namespace ios::farm_testing
