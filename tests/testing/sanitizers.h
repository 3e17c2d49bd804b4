// Whether this test binary runs under a sanitizer, and how much of an
// exhaustive check to keep there. Sanitized code runs 5-20x slower; the
// sanitizer build looks for memory errors, which a sample of a model's
// stages exercises as well as all of them, while the plain build keeps
// checking every one. Narrowed or left to the plain build this way (CI's
// 20-minute budget): exhaustive stage loops (kExhaustiveStride), heavy lazy
// and budget searches, NASNet and RandWire on the cpu device
// (ZooCheckTest), two NASNet searches sharing a DB (SharedDbTest), four
// worker processes measuring NASNet (FarmProcessTest: Inception V3 there),
// linking 20k stages (ProfileStoreTest), the PyTorch comparison (two
// models of nine: tests/onnx/CMakeLists.txt), and the lazy search's bounds
// against real oneDNN timings (CpuBoundsTest: a sanitizer's timings are not
// the cpu's).
#pragma once

#include <cstddef>

namespace ios::testing {

// GCC says so with __SANITIZE_*__, clang (the sanitized CI build) with
// __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define IOS_TEST_BUILD_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    defined(IOS_TEST_BUILD_SANITIZED)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

//! Step through exhaustive loops: every item normally, every 16th sanitized.
inline constexpr size_t kExhaustiveStride = kSanitized ? 16 : 1;

}  // namespace ios::testing
