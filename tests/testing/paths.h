// Where tests find data: the repository's own tests/data, and the optional
// ../shared fixtures (absent from a user's clone: tests that need them skip).
#pragma once

#include <filesystem>
#include <string>

namespace ios::testing {

inline std::string SharedFixture(const std::string& relative) {
  return std::string(IOS_SHARED_DIR) + "/fixtures/" + relative;
}

inline bool Exists(const std::string& path) { return std::filesystem::exists(path); }

inline std::string TestData(const std::string& relative) {
  return std::string(IOS_TEST_DATA_DIR) + "/" + relative;
}

}  // namespace ios::testing

// Skips the test visibly when a ../shared fixture is missing.
#define IOS_REQUIRE_FIXTURE(path)                                        \
  do {                                                                   \
    if (!::ios::testing::Exists(path)) {                                 \
      GTEST_SKIP() << "skipped: fixture " << (path)                      \
                   << " is absent (../shared is not beside this clone)"; \
    }                                                                    \
  } while (0)
