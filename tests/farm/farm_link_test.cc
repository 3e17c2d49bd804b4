// Link queries through the farm (protocol 7): a worker announces its devices
// and links; a link query goes only to a worker owning two devices, and
// fails at once, saying why, when none does. Real inproc and loopback
// ZeroMQ; every wait is bounded; no assertion on time.
#include <future>
#include <thread>

#include "hios/link.h"
#include "tests/farm/farm_testing.h"
#include "worker/farm_worker.h"

namespace ios::farm_testing {
namespace {

FarmOptions EmbeddedSim(int devices) {
  FarmOptions options = FastOptions();
  options.local_workers = 1;
  options.local_backend = "sim:v100";
  options.device = "sim:v100";
  options.local_backend_options.devices = devices;
  return options;
}

// A hello as a sim:v100 worker owning `devices` devices.
schema::Hello HelloOwning(uint32_t devices) {
  schema::Hello hello;
  hello.worker_id = "fake-" + std::to_string(devices);
  hello.device = devices::BuiltinRegistry().OpenBackend("sim:v100")->Device();
  hello.capacity = 2;
  hello.heartbeat_ms = 50;
  hello.devices = devices;
  if (devices > 1) hello.links = {{"host", 7.5, 3.25, true}};
  return hello;
}

TEST(FarmLinkTest, AnEmbeddedSimWorkerOwningFourGpusAnswersWithThePresetNvlink) {
  auto farm = Farm::Start(EmbeddedSim(4));
  const LinkMeasurement m = farm->MeasureLink(LinkQuery::Default());
  ASSERT_TRUE(m.ok()) << m.error_message;
  const hios::Link nvlink = hios::PresetLink(hios::LinkKind::kNvlink);
  EXPECT_TRUE(m.simulated);
  EXPECT_EQ(m.kind, "nvlink");
  EXPECT_EQ(m.gb_per_s, nvlink.gb_per_s);
  EXPECT_EQ(m.latency_us, nvlink.latency_us);
  ASSERT_EQ(m.samples.size(), LinkQuery::Default().bytes.size());
  EXPECT_EQ(m.samples.back().median_ms, nvlink.Ms(m.samples.back().bytes));
}

TEST(FarmLinkTest, WithoutAWorkerOwningTwoDevicesALinkQueryFailsAtOnceSayingSo) {
  auto farm = Farm::Start(EmbeddedSim(1));
  const LinkMeasurement m = farm->MeasureLink(LinkQuery::Default());
  EXPECT_EQ(m.error, MeasureError::kUnsupported);
  EXPECT_NE(m.error_message.find("no worker serving 'sim:v100' owns two such devices"),
            std::string::npos)
      << m.error_message;
  EXPECT_NE(m.error_message.find("--devices 2"), std::string::npos) << m.error_message;
  // The farm still measures stages afterwards.
  const ZooStages stages = StagesOf("squeezenet", 3);
  for (const MeasureResult& r : MeasureEach(*farm, stages.pointers)) EXPECT_TRUE(r.ok());
}

TEST(FarmLinkTest, ALinkQueryGoesOnlyToTheWorkerThatOwnsTwoDevices) {
  // An embedded one-device worker serves the same class and has credit to
  // spare: it must not get the link query.
  FarmOptions options = LoopbackOptions(1);
  options.device = "sim:v100";
  auto farm = Farm::Start(options);
  net::Context context;
  Peer fake(context, zmq::socket_type::dealer);
  fake.Connect(farm->BoundEndpoint());
  fake.Send(HelloOwning(2));
  ASSERT_TRUE(fake.ReceiveA<schema::Heartbeat>(5s)) << "the farm did not welcome the fake";
  auto pending = std::async(std::launch::async, [&] {
    LinkQuery query;
    query.bytes = {4096, 1 << 20};
    return farm->MeasureLink(query);
  });
  const auto query = fake.ReceiveA<schema::StageQuery>(10s);
  ASSERT_TRUE(query.has_value()) << "the link query did not reach the two-device worker";
  ASSERT_TRUE(query->link.has_value());
  EXPECT_EQ(query->link->bytes, (std::vector<int64_t>{4096, 1 << 20}));
  schema::StageResult answer{query->query_id, {}};
  answer.link = LinkMeasurement{};
  answer.link->kind = "host";
  answer.link->latency_us = 3.25;
  answer.link->gb_per_s = 7.5;
  answer.link->samples = {{4096, 0.004, 0}, {1 << 20, 0.14, 0.01}};
  fake.Send(answer);
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  const LinkMeasurement m = pending.get();
  ASSERT_TRUE(m.ok()) << m.error_message;
  EXPECT_EQ(m.kind, "host");
  EXPECT_EQ(m.gb_per_s, 7.5);
  EXPECT_EQ(m.latency_us, 3.25);
  EXPECT_EQ(m.samples.size(), 2u);
  for (const coordinator::WorkerReport& report : farm->Workers()) {
    EXPECT_EQ(report.answered, report.worker_id == "fake-2" ? 1 : 0) << report.worker_id;
  }
}

TEST(FarmLinkTest, TheLastTwoDeviceWorkerLeavingFailsTheLinkQueryInsteadOfWaiting) {
  FarmOptions options = LoopbackOptions(1);  // a one-device worker stays
  options.device = "sim:v100";
  options.wait_for_workers = 600s;  // the query must not wait for this
  options.query_timeout = 600s;
  auto farm = Farm::Start(options);
  net::Context context;
  auto fake = std::make_unique<Peer>(context, zmq::socket_type::dealer);
  fake->Connect(farm->BoundEndpoint());
  fake->Send(HelloOwning(2));
  ASSERT_TRUE(fake->ReceiveA<schema::Heartbeat>(5s));
  auto pending =
      std::async(std::launch::async, [&] { return farm->MeasureLink(LinkQuery::Default()); });
  ASSERT_TRUE(fake->ReceiveA<schema::StageQuery>(10s));
  fake.reset();  // gone silent with the query: lost after 3 heartbeats
  ASSERT_EQ(pending.wait_for(30s), std::future_status::ready) << "the link query waited on";
  const LinkMeasurement m = pending.get();
  EXPECT_EQ(m.error, MeasureError::kUnsupported);
  EXPECT_NE(m.error_message.find("owns 2 such devices"), std::string::npos) << m.error_message;
}

TEST(FarmLinkTest, AWorkerAnnouncesItsDevicesAndTheirLinks) {
  net::Context context;
  Peer coordinator(context, zmq::socket_type::router);
  const std::string endpoint = coordinator.BindLoopback();
  worker::WorkerOptions options;
  options.endpoint = endpoint;
  options.heartbeat = 50ms;
  devices::BackendOptions backend_options;
  backend_options.devices = 2;
  worker::Worker w(context, devices::BuiltinRegistry().OpenBackend("sim:v100", backend_options),
                   options);
  std::jthread thread([&](std::stop_token stop) {
    try {
      w.Run(stop);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "worker: " << e.what();
    }
  });
  const auto hello = coordinator.ReceiveA<schema::Hello>(10s);
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(hello->devices, 2u);
  ASSERT_EQ(hello->links.size(), 1u);
  EXPECT_EQ(hello->links[0].kind, "nvlink");
  EXPECT_FALSE(hello->links[0].measured);
  // And answers a link query with the measurement.
  coordinator.Send(schema::EncodeLinkQuery(31, LinkQuery::Default()));
  const auto result = coordinator.ReceiveA<schema::StageResult>(10s);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->query_id, 31u);
  ASSERT_TRUE(result->result.ok()) << result->result.error_message;
  ASSERT_TRUE(result->link.has_value());
  EXPECT_TRUE(result->link->simulated);
  thread.request_stop();
}

}  // namespace
}  // namespace ios::farm_testing
