// Internal to the cpu device: what turning one program step into oneDNN
// calls needs, whichever file the step's kind is compiled in (the lane
// compiler of cpu_primitives.cc, the transformer kinds of
// cpu_transformer.cc): views as oneDNN memory over the NHWC storage,
// temporaries in the executor's arena, memory kept for the program's life,
// and calls bound to the executor's scratchpad. One per lane, used on the
// thread that compiles (and later runs) it.
#pragma once

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "devices/cpu/cpu_primitives.h"
#include "exec/program.h"

namespace ios::devices::cpu {

class StepBuilder {
 public:
  explicit StepBuilder(const LaneContext& context);

  //! Starts a step named `where` in messages. The previous step's
  //! temporaries are dead once it has run, so this one's reuse their bytes.
  void BeginStep(std::string where);
  const std::string& where() const { return where_; }
  //! What is being built, for the message of a oneDNN failure.
  void Doing(std::string what) { doing_ = std::move(what); }
  const std::string& doing() const { return doing_; }
  //! Throws exec::ExecError (backend failure) "cpu: <where>: <message>":
  //! a step its kind's primitives cannot run (a malformed program).
  [[noreturn]] void Fail(const std::string& message) const;

  const dnnl::engine& engine() const { return engine_; }
  const exec::Program& program() const { return program_; }
  int64_t batch() const { return batch_; }
  //! The attribute of the primitives the runs execute: a user scratchpad.
  //! Copies of a dnnl::primitive_attr share one object, so a primitive
  //! that needs more (post-ops, scales) starts from NewAttr() instead.
  const dnnl::primitive_attr& attr() const { return attr_; }
  dnnl::primitive_attr NewAttr() const;

  const Shape& ShapeOf(const exec::View& view) const;
  //! The view's first value of sample 0 in its buffer's NHWC storage.
  float* DataOf(const exec::View& view) const;
  //! The view as {N, C, H, W} over its buffer's NHWC storage: channels
  //! [offset, offset + channels) at every pixel, the pixel stride being the
  //! buffer's channel count. A view of a whole buffer is a dense nhwc tensor,
  //! the layout oneDNN's AVX-512 convolutions pick themselves.
  dnnl::memory::desc ViewDesc(const exec::View& view) const;
  dnnl::memory ViewMemory(const exec::View& view) const;
  //! Whether a view is a whole buffer: a dense nhwc tensor.
  bool IsDense(const exec::View& view) const;

  //! A temporary of the current step, in the executor's arena (bound after
  //! every lane is compiled).
  dnnl::memory Temp(const dnnl::memory::desc& desc);
  //! `desc` over the bytes of `temp` (a Temp of the current step) from its
  //! float `offset` on, which must lie within it: one temporary read in
  //! several layouts.
  dnnl::memory TempAlias(const dnnl::memory& temp, const dnnl::memory::desc& desc, int64_t offset);
  //! Memory the primitives keep (weights, bias), allocated now under the
  //! budget.
  dnnl::memory Allocate(const dnnl::memory::desc& desc, const std::string& what);
  //! Runs `primitive` once, now, and waits: weights put in place at prepare.
  void RunNow(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

  //! Appends a call of `primitive` (created from `pd`), with its share of
  //! the thread's scratchpad.
  void Add(std::vector<Call>& calls, const dnnl::primitive_desc_base& pd,
           const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory> args);
  //! A copy between layouts (or between views): a reorder.
  void Copy(std::vector<Call>& calls, const dnnl::memory& from, const dnnl::memory& to);

  //! A view as a dense nhwc tensor for pooling, eltwise and binary
  //! primitives, which have only reference (slow) implementations for
  //! strided data: the view itself when it is a whole buffer, else a
  //! temporary the run fills from it with a (fast) reorder.
  dnnl::memory DenseInput(std::vector<Call>& calls, const exec::View& view);
  //! Where such a primitive writes a view: the view itself when it is a
  //! whole buffer, else a temporary that FinishOutput copies into the view.
  dnnl::memory DenseOutput(const exec::View& view);
  void FinishOutput(std::vector<Call>& calls, const exec::View& view, const dnnl::memory& written);

 private:
  const dnnl::engine& engine_;
  const exec::Program& program_;
  const std::vector<float*>& buffer_data_;
  int64_t batch_;
  MemoryBudget& budget_;
  Executor& executor_;
  dnnl::primitive_attr attr_;
  std::string where_, doing_;
  size_t step_temp_bytes_ = 0;
};

}  // namespace ios::devices::cpu
