// The cpu device on oneDNN 2.x. A program's buffers are float32 storage,
// kept NHWC (Write and Read speak NCHW); a view is a channel range of one.
// Convolutions ask oneDNN for its preferred layouts (format_tag::any) and
// reorder into and out of the views inside every run where those differ, so
// the timed region pays what a real run pays; weights are reordered once, at
// prepare. Pooling, activations and element-wise ops read and write dense
// tensors (channel ranges through temporaries). Every primitive uses
// scratchpad_mode::user with one scratchpad per executing thread, so it may
// run on any thread (docs/cpu-backend.md).
#include "devices/cpu/cpu_device.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>

#include "devices/cpu/cpu_caches.h"
#include "devices/cpu/cpu_lanes.h"
#include "devices/cpu/cpu_primitives.h"
#include "exec/program.h"

namespace ios::devices {
namespace {

using cpu::Call;
using cpu::Executor;
using cpu::MemoryBudget;
using exec::ExecError;

//! How this device runs a program (storage layout, where reorders go): part
//! of the fingerprint, so timings taken by a version that ran stages
//! differently are not mixed with these. v1: NCHW storage; v2: NHWC storage,
//! dense temporaries for channel ranges.
constexpr int kDeviceVersion = 2;
int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 62;  // unknown: do not refuse
  return static_cast<int64_t>(pages) * page_size;
}

//! a * b, or -1 when the product overflows (both >= 0).
int64_t CheckedProduct(int64_t a, int64_t b) {
  if (a != 0 && b > INT64_MAX / a) return -1;
  return a * b;
}

//! Sets the calling thread's OpenMP thread count for a scope, then restores it.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : previous_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~OmpThreads() { omp_set_num_threads(previous_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int previous_;
};

//! The thread of one lane of a stage with several lanes; lanes of stages
//! with the same lane count share their threads (lane i on thread i).
struct LaneWorker {
  LaneWorker(const dnnl::engine& engine, LaneShare share)
      : executor(engine), thread(std::move(share)) {}
  Executor executor;
  LaneThread thread;  // after `executor`: joined before it goes
};

struct CompiledStage {
  std::vector<std::vector<Call>> lanes;
  std::vector<LaneWorker*> workers;         // several lanes: lane i's thread
  std::vector<std::function<void()>> jobs;  // several lanes: lane i's run
};

//! What an allocation of a prepared program holds (cpu::Footprint).
enum class Held { kInput, kActivation, kScratch };

struct Allocation {
  uintptr_t begin = 0, end = 0;
  Held held = Held::kActivation;
};

class CpuPreparedProgram : public exec::PreparedProgram {
 public:
  CpuPreparedProgram(const dnnl::engine& engine, int threads, const std::vector<int>& cpus,
                     bool cold_runs, const exec::Program& program, int batch, MemoryBudget& budget)
      : engine_(engine),
        threads_(threads),
        cold_runs_(cold_runs),
        cpus_(cpus),
        batch_(batch),
        buffers_(program.buffers),
        main_(engine) {
    std::vector<bool> input_slot(program.slot_elements.size(), false);
    for (int input : program.inputs) {
      const int slot =
          input >= 0 && input < static_cast<int>(buffers_.size()) ? buffers_[input].slot : -1;
      if (slot >= 0 && slot < static_cast<int>(input_slot.size())) input_slot[slot] = true;
    }
    for (size_t slot = 0; slot < program.slot_elements.size(); ++slot) {
      slots_.push_back(cpu::AllocateFloats(program.slot_elements[slot] * batch,
                                           "storage slot " + std::to_string(slot)));
      const auto begin = reinterpret_cast<uintptr_t>(slots_.back().get());
      allocations_.push_back(
          {begin,
           begin + static_cast<uintptr_t>(program.slot_elements[slot] * batch * sizeof(float)),
           input_slot[slot] ? Held::kInput : Held::kActivation});
    }
    for (const exec::BufferDesc& buffer : buffers_) {
      if (buffer.slot < 0 || buffer.slot >= static_cast<int>(slots_.size())) {
        throw ExecError(MeasureError::kBackendFailure,
                        "cpu: buffer '" + buffer.label + "' names slot " +
                            std::to_string(buffer.slot) + " of " + std::to_string(slots_.size()));
      }
      buffer_data_.push_back(slots_[buffer.slot].get());
    }
    Compile(program, budget);
  }

  void Write(int buffer, std::span<const float> values) override {
    const int64_t count = BufferElements(buffer);
    if (static_cast<int64_t>(values.size()) != count) {
      throw Error("cpu: Write of buffer " + std::to_string(buffer) + " ('" +
                  buffers_[buffer].label + "'): " + std::to_string(values.size()) +
                  " values given, " + std::to_string(count) + " expected");
    }
    // NCHW values into NHWC storage.
    const Shape& s = buffers_[buffer].shape;
    const int64_t plane = int64_t{s.h} * s.w;
    float* to = buffer_data_[buffer];
    for (int64_t n = 0; n < batch_; ++n) {
      for (int64_t c = 0; c < s.c; ++c) {
        const float* from = values.data() + (n * s.c + c) * plane;
        for (int64_t p = 0; p < plane; ++p) to[(n * plane + p) * s.c + c] = from[p];
      }
    }
  }

  std::vector<float> Read(const exec::View& view) override {
    BufferElements(view.buffer);  // checks the index
    const Shape& s = buffers_[view.buffer].shape;
    if (view.offset < 0 || view.channels < 0 || view.offset + view.channels > s.c) {
      throw Error("cpu: Read of channels [" + std::to_string(view.offset) + ", " +
                  std::to_string(view.offset + view.channels) + ") of buffer '" +
                  buffers_[view.buffer].label + "' with " + std::to_string(s.c) + " channels");
    }
    // NHWC storage out as NCHW values.
    const int64_t plane = int64_t{s.h} * s.w;
    std::vector<float> values(static_cast<size_t>(batch_ * view.channels * plane));
    const float* from = buffer_data_[view.buffer] + view.offset;
    for (int64_t n = 0; n < batch_; ++n) {
      for (int64_t c = 0; c < view.channels; ++c) {
        float* to = values.data() + (n * view.channels + c) * plane;
        for (int64_t p = 0; p < plane; ++p) to[p] = from[(n * plane + p) * s.c + c];
      }
    }
    return values;
  }

  double TimedRuns(int runs) override {
    const OmpThreads omp(threads_);
    const auto start = std::chrono::steady_clock::now();
    for (int run = 0; run < runs; ++run) {
      for (CompiledStage& stage : stages_) RunStage(stage);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

  void RunStages(int begin, int end) override {
    if (begin < 0 || begin > end || end > static_cast<int>(stages_.size())) {
      throw Error("cpu: RunStages: [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") is not a range of the program's " + std::to_string(stages_.size()) +
                  " stages");
    }
    const OmpThreads omp(threads_);
    for (int s = begin; s < end; ++s) RunStage(stages_[static_cast<size_t>(s)]);
  }

  double TimedColdRuns(int runs) override {
    if (!cold_runs_) return TimedRuns(runs);
    const OmpThreads omp(threads_);
    double total = 0;
    for (int run = 0; run < runs; ++run) {
      for (const auto* ranges : {&footprint_.weights, &footprint_.inputs, &footprint_.activations,
                                 &footprint_.scratch}) {
        cpu::FlushRanges(*ranges);
      }
      total += TimedRun();
    }
    return total;
  }

  // A stage inside a network run (docs/execution.md, "How a stage is
  // measured"). Its inputs were just written by their producers: they are
  // stored to before every run. Its weights are as warm as a whole run
  // leaves them (`warm_weights`, decided from the network's footprint
  // against the cache): flushed when cold. The storage it writes is
  // treated like the weights: a network that fits the cache finds it there
  // (written by the previous run or an earlier stage), one that does not
  // last wrote it many stages and megabytes of weights ago, so it is
  // flushed with them; either way a chain's single operators start as the
  // chain runs them (input just written, output as cold as the chain's).
  // Scratchpads and layout temporaries stay warm: in a network program one
  // arena of each per thread serves every step, so a stage finds them as
  // the previous stage on its thread left them. `cache=warm` flushes
  // nothing (the whole stage as warm as the last run left it).
  double TimedRunsAsExecuted(int runs, bool warm_weights) override {
    const OmpThreads omp(threads_);
    const bool flush = cold_runs_ && !warm_weights;
    double total = 0;
    for (int run = 0; run < runs; ++run) {
      if (flush) {
        cpu::FlushRanges(footprint_.weights);
        cpu::FlushRanges(footprint_.activations);
      }
      cpu::TouchRanges(footprint_.inputs);
      total += TimedRun();
    }
    return total;
  }

 private:
  int64_t BufferElements(int buffer) const {
    if (buffer < 0 || buffer >= static_cast<int>(buffers_.size())) {
      throw Error("cpu: no buffer " + std::to_string(buffer) + " (the program has " +
                  std::to_string(buffers_.size()) + ")");
    }
    const Shape& s = buffers_[buffer].shape;
    return batch_ * s.c * s.h * s.w;
  }

  double TimedRun() {
    const auto start = std::chrono::steady_clock::now();
    for (CompiledStage& stage : stages_) RunStage(stage);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

  void RunStage(CompiledStage& stage) {
    if (stage.workers.empty()) {
      for (std::vector<Call>& lane : stage.lanes) RunCalls(lane, main_);
      return;
    }
    for (size_t i = 0; i < stage.workers.size(); ++i) stage.workers[i]->thread.Post(stage.jobs[i]);
    std::exception_ptr first;
    for (LaneWorker* worker : stage.workers) {
      try {
        worker->thread.Wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  //! The threads of stages with `lanes` lanes, created on first use.
  std::vector<std::unique_ptr<LaneWorker>>& Crew(int lanes) {
    auto& crew = crews_[lanes];
    if (crew.empty()) {
      for (LaneShare& share : SplitCores(threads_, cpus_, lanes)) {
        crew.push_back(std::make_unique<LaneWorker>(engine_, std::move(share)));
      }
    }
    return crew;
  }

  void Compile(const exec::Program& program, MemoryBudget& budget) {
    const OmpThreads omp(threads_);
    for (size_t s = 0; s < program.stages.size(); ++s) {
      const exec::ProgramStage& stage = program.stages[s];
      CompiledStage compiled;
      const int lanes = static_cast<int>(stage.lanes.size());
      const std::string where = "stage " + std::to_string(s);
      if (lanes <= 1) {
        for (const exec::Lane& lane : stage.lanes) {
          compiled.lanes.push_back(cpu::CompileLane(
              {engine_, program, buffer_data_, batch_, budget, main_}, lane, where + " lane 0"));
        }
      } else {
        auto& crew = Crew(lanes);
        compiled.lanes.resize(lanes);
        for (int i = 0; i < lanes; ++i) {
          // On the lane's own thread, one lane at a time (the budget is
          // not shared between threads).
          LaneWorker& worker = *crew[i];
          const std::function<void()> job = [&, i] {
            compiled.lanes[i] =
                cpu::CompileLane({engine_, program, buffer_data_, batch_, budget, worker.executor},
                                 stage.lanes[i], where + " lane " + std::to_string(i));
          };
          worker.thread.Post(job);
          worker.thread.Wait();
          compiled.workers.push_back(&worker);
        }
      }
      stages_.push_back(std::move(compiled));
    }
    // Jobs point into stages_, which no longer moves.
    for (CompiledStage& stage : stages_) {
      for (size_t i = 0; i < stage.workers.size(); ++i) {
        stage.jobs.push_back([calls = &stage.lanes[i], executor = &stage.workers[i]->executor] {
          RunCalls(*calls, *executor);
        });
      }
    }
    // Scratchpads and arenas of temporaries, one per executing thread, sized
    // for its largest need.
    std::vector<Executor*> executors{&main_};
    for (auto& [lanes, crew] : crews_) {
      for (auto& worker : crew) executors.push_back(&worker->executor);
    }
    for (Executor* executor : executors) {
      executor->scratch = Arena(executor->scratch_bytes, "a scratchpad", budget);
      for (dnnl::memory& user : executor->scratch_users) {
        user.set_data_handle(executor->scratch.get());
      }
      executor->temps = Arena(executor->temp_bytes, "layout temporaries", budget);
      for (const auto& [arena, bytes] :
           {std::pair{executor->scratch.get(), executor->scratch_bytes},
            std::pair{executor->temps.get(), executor->temp_bytes}}) {
        const auto begin = reinterpret_cast<uintptr_t>(arena);
        if (begin != 0) allocations_.push_back({begin, begin + bytes, Held::kScratch});
      }
      for (auto& [user, offset] : executor->temp_users) {
        user.set_data_handle(reinterpret_cast<char*>(executor->temps.get()) + offset);
      }
    }
    CollectFootprint(program);
  }

  //! Every byte a run reads or writes, by role: the memories its calls are
  //! bound to (storage, temporaries, scratchpads, and outside every
  //! allocation of ours the weights oneDNN reordered), and the whole
  //! storage of each input (what its producer writes).
  void CollectFootprint(const exec::Program& program) {
    std::vector<cpu::Range> weights, inputs, activations, scratch;
    for (const CompiledStage& stage : stages_) {
      for (const std::vector<Call>& lane : stage.lanes) {
        for (const Call& call : lane) {
          for (const auto& [arg, memory] : call.args) {
            const auto begin = reinterpret_cast<uintptr_t>(memory.get_data_handle());
            const size_t size = memory.get_desc().get_size();
            if (begin == 0 || size == 0) continue;
            const Allocation* within = AllocationOf(begin);
            const cpu::Range range{begin,
                                   within ? std::min(begin + size, within->end) : begin + size};
            if (within == nullptr) {
              weights.push_back(range);
            } else if (within->held == Held::kScratch) {
              scratch.push_back(range);
            } else {
              (within->held == Held::kInput ? inputs : activations).push_back(range);
            }
          }
        }
      }
    }
    for (int input : program.inputs) {
      const auto begin = reinterpret_cast<uintptr_t>(buffer_data_[input]);
      inputs.emplace_back(begin, begin + BufferElements(input) * sizeof(float));
    }
    footprint_ = {cpu::MergeRanges(std::move(weights)), cpu::MergeRanges(std::move(inputs)),
                  cpu::MergeRanges(std::move(activations)), cpu::MergeRanges(std::move(scratch))};
  }

  //! The storage slot or arena that holds `begin`, or nullptr (memories
  //! oneDNN allocated itself: reordered weights, biases). A range is cut at
  //! its end: a channel view's descriptor spans a whole sample's stride
  //! from its offset pointer, past the buffer's end for the last sample,
  //! and flushing a line that is not mapped faults.
  const Allocation* AllocationOf(uintptr_t begin) const {
    for (const Allocation& allocation : allocations_) {
      if (begin >= allocation.begin && begin < allocation.end) return &allocation;
    }
    return nullptr;
  }

  static cpu::Storage Arena(size_t bytes, const std::string& what, MemoryBudget& budget) {
    if (bytes == 0) return nullptr;
    budget.Reserve(static_cast<int64_t>(bytes), what);
    return cpu::AllocateFloats(static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float)),
                               what);
  }

  dnnl::engine engine_;
  int threads_;
  bool cold_runs_;
  std::vector<int> cpus_;
  int64_t batch_;
  cpu::Footprint footprint_;
  std::vector<Allocation> allocations_;  // slots and arenas
  std::vector<exec::BufferDesc> buffers_;
  std::vector<cpu::Storage> slots_;
  std::vector<float*> buffer_data_;
  Executor main_;
  std::map<int, std::vector<std::unique_ptr<LaneWorker>>> crews_;
  std::vector<CompiledStage> stages_;  // after crews_: gone before the threads
};

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string model = line.substr(colon + 1);
    model.erase(0, model.find_first_not_of(" \t"));
    model.erase(model.find_last_not_of(" \t") + 1);
    if (!model.empty()) return model;
  }
  return "unknown cpu";
}

std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
  }
  return "isa" + std::to_string(static_cast<int>(isa));
}

//! OpenMP's wait policy, read by libgomp when it loads (so it cannot be set
//! from here): spinning threads make a loaded machine's timings many times
//! slower, sleeping ones cost small operators a wake-up. Timings taken
//! under different policies are not comparable.
std::string OmpWaitPolicy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (policy == nullptr || *policy == '\0') return "default";
  std::string value(policy);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return value == "active" || value == "passive" ? value : "default";
}

//! The last-level cache the search weighs a network's footprint against
//! (StageCostFacts::cache_bytes), in KiB, or "unknown". From sysfs, which
//! describes one instance of each cache as a core sees it (an EPYC core:
//! its CCD's L3). Not sysconf(_SC_LEVEL3_CACHE_SIZE), nor CPUID leaf
//! 0x80000006 under it: on an EPYC VM they say the whole socket's L3 (on
//! the 2-core machine of docs/benchmarks.md 508 MiB, where a Zen 5 core
//! sees its CCD's 32), which would call every network's weights warm. A
//! VM without the caches in sysfs (that one) says unknown: weights cold.
std::string LastLevelCacheText() {
  const int64_t bytes = cpu::LastLevelCacheBytes();
  return bytes > 0 ? std::to_string(bytes / 1024) : "unknown";
}

class CpuDevice : public exec::Device {
 public:
  explicit CpuDevice(const CpuOptions& options) : cpus_(AllowedCpus()), host_cpus_(options.cpus) {
#if defined(__x86_64__)
    cold_runs_ = options.cold_stage_runs;
#endif
    if (options.threads < 0) throw Error("cpu: threads must be >= 1 (0: every core)");
    for (int cpu : options.cpus) {
      if (std::find(cpus_.begin(), cpus_.end(), cpu) == cpus_.end()) {
        throw Error("cpu: cpus: core " + std::to_string(cpu) +
                    " is not one this process may run on (" + std::to_string(cpus_.size()) +
                    " allowed, from " + std::to_string(cpus_.front()) + " to " +
                    std::to_string(cpus_.back()) + ")");
      }
    }
    if (!options.cpus.empty()) cpus_ = options.cpus;
    threads_ = options.threads > 0 ? options.threads : static_cast<int>(cpus_.size());
    try {
      engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      cpu::ThrowDnnl(e, "creating the cpu engine");
    }
    const dnnl_version_t* version = dnnl_version();
    const std::string model = CpuModel();
    const int cores = std::min(threads_, static_cast<int>(cpus_.size()));
    info_.backend = "cpu";
    info_.name = "cpu:" + model;
    info_.fingerprint =
        "cpu-v" + std::to_string(kDeviceVersion) + "|model=" + model +
        "|isa=" + IsaName(dnnl::get_effective_cpu_isa()) + "|cores=" + std::to_string(cores) +
        "|threads=" + std::to_string(threads_) + "|onednn=" + std::to_string(version->major) + "." +
        std::to_string(version->minor) + "." + std::to_string(version->patch) +
        "|omp_wait=" + OmpWaitPolicy() + "|cache=" + (cold_runs_ ? "cold" : "warm") +
        "|llc_kib=" + LastLevelCacheText() + "|fp32";
    info_.simulated = false;
  }

  const DeviceInfo& Info() const override { return info_; }
  std::vector<int> HostCpus() const override { return host_cpus_; }

  std::unique_ptr<exec::PreparedProgram> Prepare(const exec::Program& program, int batch) override {
    if (batch < 1) throw ExecError(MeasureError::kUnsupported, "cpu: batch size must be >= 1");
    try {
      exec::Validate(program);
    } catch (const Error& e) {
      throw ExecError(MeasureError::kBackendFailure,
                      std::string("cpu: the program is not well formed: ") + e.what());
    }
    MemoryBudget budget(PhysicalMemoryBytes());
    // Activation storage and weights first: an absurd batch size fails here,
    // before oneDNN is asked for anything of that size.
    int64_t activation = 0;
    for (int64_t elements : program.slot_elements) {
      const int64_t bytes = CheckedProduct(CheckedProduct(elements, batch), sizeof(float));
      activation = bytes < 0 || activation > INT64_MAX - bytes ? -1 : activation + bytes;
      if (activation < 0) break;
    }
    budget.Reserve(activation, "the activations at batch " + std::to_string(batch));
    try {
      return std::make_unique<CpuPreparedProgram>(engine_, threads_, cpus_, cold_runs_, program,
                                                  batch, budget);
    } catch (const dnnl::error& e) {
      cpu::ThrowDnnl(e, "preparing the program");
    } catch (const std::bad_alloc&) {
      throw ExecError(MeasureError::kOutOfMemory, "cpu: out of memory preparing the program");
    }
  }

 private:
  std::vector<int> cpus_;       // where its lanes may be pinned
  std::vector<int> host_cpus_;  // the cpus option: where its driving thread belongs
  int threads_ = 1;
  bool cold_runs_ = false;
  dnnl::engine engine_;
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<exec::Device> MakeCpuDevice(const CpuOptions& options) {
  return std::make_unique<CpuDevice>(options);
}

}  // namespace ios::devices
