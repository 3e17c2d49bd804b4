#include "hios/sim_instance.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tests/testing/paths.h"

namespace ios::hios {
namespace {

const std::string kSeed0 =
    std::string(IOS_HIOS_INSTANCES) + "/hios_sim_N200_E400_L14_G4_p0.8_seed0.json";

TEST(SimInstanceTest, LoadsAnInstanceWithItsCostsAndTheReferenceResults) {
  IOS_REQUIRE_FIXTURE(kSeed0);
  const SimInstance sim = LoadSimInstance(kSeed0);
  EXPECT_EQ(sim.dag.ops(), 200);
  EXPECT_EQ(sim.dag.edge_count(), 400);
  EXPECT_EQ(sim.devices, 4);
  EXPECT_EQ(sim.window_size, 2);
  EXPECT_EQ(sim.max_streams, 2);
  ASSERT_TRUE(sim.upstream.has_value());
  EXPECT_NEAR(sim.upstream->hios_lp, 183.53717358999995, 1e-9);
  // Every edge's transfer is the generator's max(0.1, 0.8 t(dst)).
  for (EdgeId e = 0; e < sim.dag.edge_count(); ++e) {
    const double t = sim.op_ms[static_cast<size_t>(sim.dag.edge(e).dst)];
    EXPECT_NEAR(sim.costs->TransferMs(e, 0, 1), std::max(0.1, 0.8 * t), 1e-9);
  }
  // A pair is priced by the formula the reference used.
  const std::vector<OpId> pair{sim.dag.topological()[1], sim.dag.topological()[2]};
  const double formula =
      0.5 * (sim.op_ms[static_cast<size_t>(pair[0])] + sim.op_ms[static_cast<size_t>(pair[1])]) +
      0.5 * std::max({sim.op_ms[static_cast<size_t>(pair[0])] *
                              sim.utilization[static_cast<size_t>(pair[0])] +
                          sim.op_ms[static_cast<size_t>(pair[1])] *
                              sim.utilization[static_cast<size_t>(pair[1])],
                      sim.op_ms[static_cast<size_t>(pair[0])],
                      sim.op_ms[static_cast<size_t>(pair[1])]});
  EXPECT_DOUBLE_EQ(sim.costs->StageMs(pair, 0), formula);
}

// Writes seed 0 with one change, loads it, and returns the error message.
std::string RefusalOf(const std::function<void(nlohmann::json&)>& spoil) {
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(kSeed0));
  spoil(doc);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hios_bad_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << doc.dump();
  try {
    LoadSimInstance(path);
  } catch (const Error& e) {
    std::filesystem::remove(path);
    return e.what();
  }
  std::filesystem::remove(path);
  return "(accepted)";
}

TEST(SimInstanceTest, RefusesBadInputNamingTheFileTheFieldAndWhatWasExpected) {
  IOS_REQUIRE_FIXTURE(kSeed0);
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> spoil;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"format", [](auto& d) { d["format"] = "hios-sim-instance/v2"; },
       "format: expected \"hios-sim-instance/v1\", found \"hios-sim-instance/v2\""},
      {"time", [](auto& d) { d["operators"][3]["time"] = -1; },
       "operators[3].time: expected a number >= 0, found -1"},
      {"missing time", [](auto& d) { d["operators"][3].erase("time"); },
       "operators[3].time: expected a field \"time\", found nothing"},
      {"duplicate id", [](auto& d) { d["operators"][4]["id"] = d["operators"][3]["id"]; },
       "operators[4].id: expected an id not seen before"},
      {"edge end", [](auto& d) { d["edges"][7]["dst"] = 200; },
       "edges[7].dst: expected an integer in [0, 200), found 200"},
      {"cycle",
       [](auto& d) {
         d["edges"].push_back({{"src", 199}, {"dst", 0}, {"transfer", 1.0}});
       },
       "edges: hios dag: the edges form a cycle"},
      {"pair",
       [](auto& d) {
         d["pair_group_times"][0] = {1, 2};
       },
       "pair_group_times[0]: expected [a, b, time]"},
      {"gpu", [](auto& d) { d["results_upstream_code"]["lp_gpu_of"]["5"] = 4; },
       "results_upstream_code.lp_gpu_of[\"5\"]: expected an integer in [0, 4), found 4"},
      {"stage",
       [](auto& d) {
         d["results_upstream_code"]["mr_stages_per_gpu"]["9"] = nlohmann::json::array();
       },
       "results_upstream_code.mr_stages_per_gpu[\"9\"]: expected a gpu in [0, 4)"},
  };
  for (const Case& c : cases) {
    const std::string message = RefusalOf(c.spoil);
    EXPECT_NE(message.find("hios_bad_"), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
  }
}

TEST(SimInstanceTest, RefusesAMissingFileAndAFileThatIsNotJson) {
  EXPECT_THROW(LoadSimInstance("/nonexistent/hios.json"), Error);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hios_notjson_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << "{\"format\": ";
  EXPECT_THROW(LoadSimInstance(path), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ios::hios
