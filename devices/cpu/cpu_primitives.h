// Internal to the cpu device (devices/cpu/cpu_device.cc): the oneDNN primitives
// of one lane's steps, the memory budget they are allocated under, and what
// a thread needs to run them.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exec/program.h"

namespace ios::devices::cpu {

//! Bytes a prepared program will hold, checked against the machine's
//! physical memory before anything is allocated, so a stage that cannot fit
//! is an out-of-memory result instead of a swap storm or a killed worker.
class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit) : limit_(limit) {}
  //! Throws exec::ExecError (out of memory) naming `what` when `bytes` do
  //! not fit beside what is already reserved; `bytes` < 0 stands for
  //! "overflows int64".
  void Reserve(int64_t bytes, const std::string& what);

 private:
  int64_t limit_;
  int64_t used_ = 0;
};

//! The alignment of our allocations and temporaries: a cache line, enough
//! for every ISA oneDNN uses.
inline constexpr size_t kAlignment = 64;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Storage = std::unique_ptr<float, FreeDeleter>;

//! Zeroed, 64-byte aligned storage for `count` floats: touching it once here
//! keeps page faults out of the timed runs and makes unwritten buffers read
//! as zeros. Throws exec::ExecError (out of memory) naming `what`.
Storage AllocateFloats(int64_t count, const std::string& what);

//! Throws `e` as an exec::ExecError: unimplemented is unsupported, out of
//! memory is out of memory, anything else a backend failure; the message
//! says where and quotes oneDNN.
[[noreturn]] void ThrowDnnl(const dnnl::error& e, const std::string& where);

//! What one thread needs to run primitives: its stream, its scratchpad
//! (sized to the largest need of the primitives it runs) and its arena of
//! temporaries.
struct Executor {
  explicit Executor(const dnnl::engine& engine) : stream(engine) {}
  dnnl::stream stream;
  size_t scratch_bytes = 0;
  std::vector<dnnl::memory> scratch_users;  // bound to `scratch` once it exists
  Storage scratch;
  //! Temporaries of one step (copies between layouts), placed at offsets of
  //! one arena: the steps a thread runs run one after another, so they all
  //! share it. Sized to the step that needs most.
  size_t temp_bytes = 0;
  std::vector<std::pair<dnnl::memory, size_t>> temp_users;  // bound to `temps` at their offset
  Storage temps;
};

struct Call {
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
};

//! Runs `calls` in order on the executor's stream and waits for them.
void RunCalls(std::vector<Call>& calls, Executor& executor);

//! What compiling one lane needs. Views address `buffer_data` (one pointer
//! per program buffer into NHWC storage).
struct LaneContext {
  const dnnl::engine& engine;
  const exec::Program& program;
  const std::vector<float*>& buffer_data;
  int64_t batch = 1;
  MemoryBudget& budget;
  Executor& executor;
};

//! The calls that run `lane` (layout reorders included), with the weights
//! reordered and the scratchpad needs recorded in the executor. Call it on
//! the thread that will run the calls, after setting its OpenMP thread
//! count. Throws exec::ExecError naming `where`, the step and the call.
std::vector<Call> CompileLane(const LaneContext& context, const exec::Lane& lane,
                              const std::string& where);

}  // namespace ios::devices::cpu
