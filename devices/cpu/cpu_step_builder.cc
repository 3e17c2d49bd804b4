#include "devices/cpu/cpu_step_builder.h"

#include <algorithm>
#include <utility>

#include "devices/cpu/cpu_dnnl_terms.h"
#include "exec/device.h"

namespace ios::devices::cpu {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

StepBuilder::StepBuilder(const LaneContext& context)
    : engine_(context.engine),
      program_(context.program),
      buffer_data_(context.buffer_data),
      batch_(context.batch),
      budget_(context.budget),
      executor_(context.executor),
      attr_(NewAttr()) {}

void StepBuilder::BeginStep(std::string where) {
  where_ = std::move(where);
  doing_.clear();
  step_temp_bytes_ = 0;
}

void StepBuilder::Fail(const std::string& message) const {
  throw exec::ExecError(MeasureError::kBackendFailure, "cpu: " + where_ + ": " + message);
}

dnnl::primitive_attr StepBuilder::NewAttr() const {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

const Shape& StepBuilder::ShapeOf(const exec::View& view) const {
  return program_.buffers.at(view.buffer).shape;
}

float* StepBuilder::DataOf(const exec::View& view) const {
  return buffer_data_.at(view.buffer) + view.offset;
}

memory::desc StepBuilder::ViewDesc(const exec::View& view) const {
  const Shape& s = ShapeOf(view);
  return memory::desc(Dims{batch_, view.channels, s.h, s.w}, kF32,
                      Dims{int64_t{s.c} * s.h * s.w, 1, int64_t{s.w} * s.c, s.c});
}

memory StepBuilder::ViewMemory(const exec::View& view) const {
  return memory(ViewDesc(view), engine_, DataOf(view));
}

bool StepBuilder::IsDense(const exec::View& view) const {
  return view.offset == 0 && view.channels == ShapeOf(view).c;
}

memory StepBuilder::Temp(const memory::desc& desc) {
  memory temp(desc, engine_, DNNL_MEMORY_NONE);
  executor_.temp_users.emplace_back(temp, step_temp_bytes_);
  step_temp_bytes_ += (desc.get_size() + kAlignment - 1) / kAlignment * kAlignment;
  executor_.temp_bytes = std::max(executor_.temp_bytes, step_temp_bytes_);
  return temp;
}

memory StepBuilder::TempAlias(const memory& temp, const memory::desc& desc, int64_t offset) {
  const auto base = std::find_if(executor_.temp_users.rbegin(), executor_.temp_users.rend(),
                                 [&](const auto& user) { return user.first == temp; });
  if (base == executor_.temp_users.rend()) Fail("an alias of memory that is no temporary");
  memory alias(desc, engine_, DNNL_MEMORY_NONE);
  executor_.temp_users.emplace_back(alias,
                                    base->second + static_cast<size_t>(offset) * sizeof(float));
  return alias;
}

memory StepBuilder::Allocate(const memory::desc& desc, const std::string& what) {
  budget_.Reserve(static_cast<int64_t>(desc.get_size()), where_ + ": " + what);
  doing_ = "allocating " + what;
  return memory(desc, engine_);
}

void StepBuilder::RunNow(const dnnl::primitive& primitive,
                         const std::unordered_map<int, memory>& args) {
  primitive.execute(executor_.stream, args);
  executor_.stream.wait();
}

void StepBuilder::Add(std::vector<Call>& calls, const dnnl::primitive_desc_base& pd,
                      const dnnl::primitive& primitive, std::unordered_map<int, memory> args) {
  const memory::desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0) {
    memory user(scratch, engine_, DNNL_MEMORY_NONE);
    args.emplace(DNNL_ARG_SCRATCHPAD, user);
    executor_.scratch_users.push_back(user);
    executor_.scratch_bytes = std::max(executor_.scratch_bytes, scratch.get_size());
  }
  calls.push_back(Call{primitive, std::move(args)});
}

void StepBuilder::Copy(std::vector<Call>& calls, const memory& from, const memory& to) {
  doing_ = "reorder::primitive_desc from " + DescribeDesc(from.get_desc()) + " to " +
           DescribeDesc(to.get_desc());
  const dnnl::reorder::primitive_desc pd(engine_, from.get_desc(), engine_, to.get_desc(), attr_);
  doing_ = "creating a reorder";
  Add(calls, pd, dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

memory StepBuilder::DenseInput(std::vector<Call>& calls, const exec::View& view) {
  memory plain = ViewMemory(view);
  if (IsDense(view)) return plain;
  const Shape& s = ShapeOf(view);
  memory dense = Temp(memory::desc(Dims{batch_, view.channels, s.h, s.w}, kF32, Tag::nhwc));
  Copy(calls, plain, dense);
  return dense;
}

memory StepBuilder::DenseOutput(const exec::View& view) {
  if (IsDense(view)) return ViewMemory(view);
  const Shape& s = ShapeOf(view);
  return Temp(memory::desc(Dims{batch_, view.channels, s.h, s.w}, kF32, Tag::nhwc));
}

void StepBuilder::FinishOutput(std::vector<Call>& calls, const exec::View& view,
                               const memory& written) {
  if (!IsDense(view)) Copy(calls, written, ViewMemory(view));
}

}  // namespace ios::devices::cpu
