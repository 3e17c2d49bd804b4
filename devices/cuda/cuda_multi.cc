// The multi-GPU player (cuda_multi.h). One run, as enqueued:
//   - every device d's stages in pieces between the stages after which it
//     sends and before which it receives, on its own origin stream;
//   - after a sending piece, the sender's origin records the copy's
//     `produced` event; before a receiving piece, the receiver's copy stream
//     waits on it, copies (cudaMemcpyPeerAsync), records `copied`, and the
//     receiver's origin waits on that;
//   - between runs every origin waits on every other device's `last` event
//     of the previous run, so no run overwrites what another still reads.
// Host order is a topological order of the pieces (a piece is enqueued only
// once the pieces it receives from are), so every wait refers to an event
// already recorded for this run: the GPU never waits on the host, and a
// run that fails half-way leaves only finite work in flight.
#include "devices/cuda/cuda_multi.h"

#include <spdlog/spdlog.h>

#include <set>
#include <string>
#include <utility>

#include "devices/cuda/cuda_program.h"

namespace ios::devices {
namespace cuda_detail {
namespace {

using exec::ExecError;

// One device's part of the run.
struct Part {
  std::shared_ptr<DeviceState> state;
  int gpu = 0;
  std::string name;  // "device 1 (GPU 0)"
  std::unique_ptr<CudaPreparedProgram> program;
  OwnedStream copy_stream;                                      // only where the device receives
  OwnedEvent last;                                              // the end of its part of the run
  std::vector<std::vector<size_t>> receive_before, send_after;  // per stage: copies
  cuda::Api& api() const { return *state->api; }
};

// One copy and the pointers it was resolved to at prepare.
struct Copy {
  exec::ProgramCopy spec;
  OwnedEvent produced;  // on the sender's GPU
  OwnedEvent copied;    // on the receiver's GPU
  const float* src = nullptr;
  float* dst = nullptr;
  size_t chunk_bytes = 0;      // one contiguous piece
  int chunks = 1;              // 1, or one per sample of a channel view
  int64_t src_chunk_step = 0;  // floats between the source's pieces
};

class CudaMultiProgram final : public exec::PreparedMultiProgram {
 public:
  CudaMultiProgram(const std::vector<exec::Device*>& devices,
                   const std::vector<const exec::Program*>& programs,
                   const std::vector<exec::ProgramCopy>& copies, int batch) {
    parts_.reserve(devices.size());  // parts are borrowed by reference below
    if (devices.empty() || devices.size() != programs.size()) {
      throw Error("cuda multi-device run: " + std::to_string(programs.size()) + " programs for " +
                  std::to_string(devices.size()) + " devices");
    }
    for (size_t d = 0; d < devices.size(); ++d) {
      Part& part = parts_.emplace_back();
      part.state = devices[d] == nullptr ? nullptr : StateOf(*devices[d]);
      if (!part.state) {
        throw Error("cuda multi-device run: device " + std::to_string(d) + " is not a cuda device");
      }
      part.gpu = part.state->options.gpu;
      part.name = "device " + std::to_string(d) + " (GPU " + std::to_string(part.gpu) + ")";
      // Prepare() checks the program and remembers a lost device.
      std::unique_ptr<exec::PreparedProgram> prepared;
      Named(part, [&] { prepared = devices[d]->Prepare(*programs[d], batch); });
      part.program.reset(static_cast<CudaPreparedProgram*>(prepared.release()));
      part.receive_before.resize(programs[d]->stages.size());
      part.send_after.resize(programs[d]->stages.size());
    }
    EnablePeerAccess(copies);
    for (size_t c = 0; c < copies.size(); ++c) AddCopy(c, copies[c], batch);
    for (Part& part : parts_) {
      On(part, "creating the run's last event");
      part.last = NewEvent(part, false, "creating the run's last event");
    }
    Part& first = parts_.front();
    On(first, "creating the clock");
    start_ = NewEvent(first, true, "creating the clock");
    end_ = NewEvent(first, true, "creating the clock");
  }

  ~CudaMultiProgram() override {
    // A run that failed half-way leaves copies in flight: they end before
    // the buffers they write go (each program waits for its own streams).
    // Neither this nor the destroys that follow need the GPU current.
    for (Part& part : parts_) {
      if (part.copy_stream.get()) (void)part.api().SynchronizeStream(part.copy_stream.get());
    }
  }

  void Write(int device, int buffer, std::span<const float> values) override {
    Part& part = At(device);
    On(part, "writing buffer " + std::to_string(buffer));
    Named(part, [&] { part.program->Write(buffer, values); });
  }

  std::vector<float> Read(int device, const exec::View& view) override {
    Part& part = At(device);
    On(part, "reading buffer " + std::to_string(view.buffer));
    std::vector<float> values;
    Named(part, [&] { values = part.program->Read(view); });
    return values;
  }

  double TimedRuns(int runs) override {
    if (runs < 1) throw Error("cuda multi-device run: " + std::to_string(runs) + " runs");
    Part& first = parts_.front();
    // Every device starts after the clock: a device that started earlier
    // would be timed from its own start.
    On(first, "starting the clock");
    Check(first, first.api().RecordEvent(start_.get(), first.program->OriginStream()),
          "starting the clock");
    for (size_t d = 1; d < parts_.size(); ++d) {
      On(parts_[d], "starting the clock");
      Check(parts_[d], parts_[d].api().WaitEvent(parts_[d].program->OriginStream(), start_.get()),
            "starting the clock");
    }
    for (int run = 0; run < runs; ++run) {
      if (run > 0) Barrier();
      EnqueueRun();
      for (Part& part : parts_) {
        On(part, "ending a run");
        Check(part, part.api().RecordEvent(part.last.get(), part.program->OriginStream()),
              "ending a run");
      }
    }
    // The run ends when the last device does: the first device's origin
    // waits for every other one's end before the clock stops.
    On(first, "stopping the clock");
    for (size_t d = 1; d < parts_.size(); ++d) {
      Check(first, first.api().WaitEvent(first.program->OriginStream(), parts_[d].last.get()),
            "stopping the clock");
    }
    Check(first, first.api().RecordEvent(end_.get(), first.program->OriginStream()),
          "stopping the clock");
    Check(first, first.api().SynchronizeEvent(end_.get()), "waiting for the runs");
    float ms = 0;
    Check(first, first.api().ElapsedMs(start_.get(), end_.get(), ms), "reading the clock");
    return ms;
  }

 private:
  Part& At(int device) {
    if (device < 0 || device >= static_cast<int>(parts_.size())) {
      throw Error("cuda multi-device run: no device " + std::to_string(device));
    }
    return parts_[static_cast<size_t>(device)];
  }

  // Fail() that names the device (and remembers a lost GPU).
  void Check(Part& part, const cuda::Status& status, const std::string& where) {
    if (status.ok()) return;
    if (status.code == cuda::Code::kDeviceLost) part.state->lost = true;
    Fail(status, part.name + ": " + where);
  }

  // Runs what the part's program does, its errors naming the device.
  template <class F>
  static void Named(const Part& part, F&& work) {
    try {
      work();
    } catch (const exec::DeviceLostError& e) {
      throw exec::DeviceLostError(part.name + ": " + e.what());
    } catch (const ExecError& e) {
      throw ExecError(e.kind(), part.name + ": " + e.what());
    }
  }

  // Makes the part's GPU current: every call that follows is about it.
  void On(Part& part, const std::string& where) {
    Check(part, part.api().SetDevice(part.gpu), where);
  }

  OwnedEvent NewEvent(Part& part, bool timing, const std::string& where) {
    cuda::Event event;
    Check(part, part.api().CreateEvent(event, timing), where);
    return {part.api(), event};
  }

  // Once per ordered pair (receiver, sender) of distinct GPUs: the copy runs
  // on the receiver's stream and reads the sender's memory.
  void EnablePeerAccess(const std::vector<exec::ProgramCopy>& copies) {
    std::set<std::pair<int, int>> pairs;
    for (const exec::ProgramCopy& copy : copies) {
      Part& to = At(copy.to);
      const int from = At(copy.from).gpu;
      if (from == to.gpu || !pairs.emplace(to.gpu, from).second) continue;
      const std::string where = "enabling access to GPU " + std::to_string(from) + "'s memory";
      On(to, where);
      bool can = false;
      Check(to, to.api().CanAccessPeer(to.gpu, from, can), where);
      if (!can) {
        // cudaMemcpyPeerAsync still works: the driver stages it through
        // host memory, slower but correct.
        spdlog::info(
            "cuda: GPU {} cannot access GPU {}'s memory directly; copies between them are staged "
            "through the host by the driver",
            to.gpu, from);
        continue;
      }
      Check(to, to.api().EnablePeerAccess(from), where);
    }
  }

  void AddCopy(size_t c, const exec::ProgramCopy& spec, int batch) {
    Part& from = At(spec.from);
    Part& to = At(spec.to);
    const std::string where = spec.label;
    if (spec.after_stage < 0 || spec.after_stage >= static_cast<int>(from.send_after.size()) ||
        spec.before_stage < 0 || spec.before_stage >= static_cast<int>(to.receive_before.size())) {
      throw Error("cuda multi-device run: " + where + ": after stage " +
                  std::to_string(spec.after_stage) + ", before stage " +
                  std::to_string(spec.before_stage) + ": out of the programs' stages");
    }
    const Shape& source = from.program->BufferShape(spec.source.buffer);
    const Shape& target = to.program->BufferShape(spec.buffer);
    if (target.c != spec.source.channels || target.h != source.h || target.w != source.w) {
      throw Error("cuda multi-device run: " + where + ": a view of " +
                  std::to_string(spec.source.channels) + "x" + std::to_string(source.h) + "x" +
                  std::to_string(source.w) + " into a buffer of " + ShapeText(target));
    }
    Copy& copy = copies_.emplace_back();
    copy.spec = spec;
    copy.src = from.program->DeviceAddress(spec.source);
    copy.dst = to.program->DeviceAddress({spec.buffer, 0, target.c});
    const size_t plane = static_cast<size_t>(source.h) * source.w;
    const bool whole = spec.source.offset == 0 && spec.source.channels == source.c;
    // A channel view is one contiguous range per sample: one copy each.
    copy.chunks = whole ? 1 : batch;
    copy.chunk_bytes = plane * spec.source.channels * (whole ? batch : 1) * sizeof(float);
    copy.src_chunk_step = static_cast<int64_t>(plane) * source.c;
    On(from, where);
    copy.produced = NewEvent(from, false, where);
    On(to, where);
    copy.copied = NewEvent(to, false, where);
    if (!to.copy_stream.get()) {
      cuda::Stream stream;
      Check(to, to.api().CreateStream(stream), "creating the copy stream");
      to.copy_stream = OwnedStream(to.api(), stream);
    }
    from.send_after[static_cast<size_t>(spec.after_stage)].push_back(c);
    to.receive_before[static_cast<size_t>(spec.before_stage)].push_back(c);
  }

  // Every device's stages and copies of one run, in an order where each
  // piece comes after the pieces it receives from.
  void EnqueueRun() {
    std::vector<int> done(parts_.size(), 0);  // stages enqueued, per device
    const auto ready = [&](const Copy& copy) {
      return done[static_cast<size_t>(copy.spec.from)] > copy.spec.after_stage;
    };
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (size_t d = 0; d < parts_.size(); ++d) {
        Part& part = parts_[d];
        const int stages = static_cast<int>(part.receive_before.size());
        int& k = done[d];
        while (k < stages) {
          const auto& receives = part.receive_before[static_cast<size_t>(k)];
          bool can = true;
          for (size_t c : receives) can = can && ready(copies_[c]);
          if (!can) break;
          On(part, "running stage " + std::to_string(k));
          for (size_t c : receives) EnqueueCopy(copies_[c]);
          int end = k + 1;
          while (end < stages && part.send_after[static_cast<size_t>(end - 1)].empty() &&
                 part.receive_before[static_cast<size_t>(end)].empty()) {
            ++end;
          }
          Named(part, [&] { part.program->EnqueueStages(k, end); });
          for (size_t c : part.send_after[static_cast<size_t>(end - 1)]) {
            Check(part,
                  part.api().RecordEvent(copies_[c].produced.get(), part.program->OriginStream()),
                  copies_[c].spec.label + ": marking the tensor computed");
          }
          k = end;
          progressed = true;
        }
      }
    }
    for (size_t d = 0; d < parts_.size(); ++d) {
      if (done[d] < static_cast<int>(parts_[d].receive_before.size())) {
        throw Error("cuda multi-device run: " + parts_[d].name + " waits at stage " +
                    std::to_string(done[d]) +
                    " for a copy whose sender waits too: the copies form a cycle");
      }
    }
  }

  // On the receiver (current): copy stream waits for the tensor, copies it,
  // and the receiver's origin waits for the copy.
  void EnqueueCopy(Copy& copy) {
    Part& to = At(copy.spec.to);
    const int from_gpu = At(copy.spec.from).gpu;
    const cuda::Stream stream = to.copy_stream.get();
    const std::string& what = copy.spec.label;
    Check(to, to.api().WaitEvent(stream, copy.produced.get()), what + ": waiting for the tensor");
    for (int chunk = 0; chunk < copy.chunks; ++chunk) {
      const size_t floats = copy.chunk_bytes / sizeof(float);
      Check(to,
            to.api().CopyPeerAsync(copy.dst + chunk * floats, to.gpu,
                                   copy.src + chunk * copy.src_chunk_step, from_gpu,
                                   copy.chunk_bytes, stream),
            what + " (" + std::to_string(copy.chunk_bytes) + " bytes)");
    }
    Check(to, to.api().RecordEvent(copy.copied.get(), stream), what + ": marking it copied");
    Check(to, to.api().WaitEvent(to.program->OriginStream(), copy.copied.get()),
          what + ": waiting for the copy");
  }

  // Between runs: no device starts before every other has ended.
  void Barrier() {
    for (Part& part : parts_) {
      On(part, "starting a run");
      for (const Part& other : parts_) {
        if (&other == &part) continue;
        Check(part, part.api().WaitEvent(part.program->OriginStream(), other.last.get()),
              "starting a run after " + other.name + "'s previous one");
      }
    }
  }

  // Declared so that the events and copy streams go before the programs
  // (whose destructors wait for their streams).
  std::vector<Part> parts_;
  std::vector<Copy> copies_;
  OwnedEvent start_, end_;
};

}  // namespace
}  // namespace cuda_detail

bool AreCudaDevices(const std::vector<exec::Device*>& devices) {
  if (devices.empty()) return false;
  for (exec::Device* device : devices) {
    if (device == nullptr || !cuda_detail::StateOf(*device)) return false;
  }
  return true;
}

std::unique_ptr<exec::PreparedMultiProgram> PrepareCudaMultiProgram(
    const std::vector<exec::Device*>& devices, const std::vector<const exec::Program*>& programs,
    const std::vector<exec::ProgramCopy>& copies, int batch) {
  return std::make_unique<cuda_detail::CudaMultiProgram>(devices, programs, copies, batch);
}

}  // namespace ios::devices
