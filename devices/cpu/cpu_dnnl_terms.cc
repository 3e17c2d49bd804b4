#include "devices/cpu/cpu_dnnl_terms.h"

#include "exec/device.h"

namespace ios::devices::cpu {

using exec::ExecError;

MeasureError KindOf(const dnnl::error& e) {
  switch (e.status) {
    case dnnl_unimplemented:
      return MeasureError::kUnsupported;
    case dnnl_out_of_memory:
      return MeasureError::kOutOfMemory;
    default:
      return MeasureError::kBackendFailure;
  }
}

std::vector<Eltwise> EltwiseStepsOf(Activation act) {
  using dnnl::algorithm;
  switch (act) {
    case Activation::kRelu:
      return {{algorithm::eltwise_relu}};
    case Activation::kSigmoid:
      return {{algorithm::eltwise_logistic}};
    case Activation::kTanh:
      return {{algorithm::eltwise_tanh}};
    case Activation::kRelu6:
      return {{algorithm::eltwise_clip, 0.f, 6.f}};
    case Activation::kHardSwish:
      return {{algorithm::eltwise_hardswish}};  // x * relu6(x + 3) / 6 in oneDNN 2.x
    case Activation::kSilu:
      return {{algorithm::eltwise_swish, 1.f}};  // x * sigmoid(alpha * x)
    case Activation::kHardSigmoid:               // clip(x / 6 + 1/2, 0, 1)
      return {{algorithm::eltwise_linear, 1.f / 6, 0.5f}, {algorithm::eltwise_clip, 0.f, 1.f}};
    case Activation::kLeakyRelu:  // alpha: the slope below zero
      return {{algorithm::eltwise_relu, kLeakyReluSlope}};
    case Activation::kGelu:
      return {{algorithm::eltwise_gelu_erf}};
    case Activation::kGeluTanh:
      return {{algorithm::eltwise_gelu_tanh}};
    case Activation::kNone:
      break;
  }
  throw ExecError(MeasureError::kUnsupported, "cpu: no eltwise algorithm for activation none");
}

std::string DescribeDesc(const dnnl::memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  std::string text = "dims";
  for (int i = 0; i < d.ndims; ++i) text += (i ? "x" : " ") + std::to_string(d.dims[i]);
  if (d.format_kind != dnnl_blocked) return text + " (not a blocked layout)";
  const dnnl_blocking_desc_t& blocking = d.format_desc.blocking;
  text += " strides";
  for (int i = 0; i < d.ndims; ++i) text += (i ? "," : " ") + std::to_string(blocking.strides[i]);
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    text += " block" + std::to_string(blocking.inner_idxs[i]) + ":" +
            std::to_string(blocking.inner_blks[i]);
  }
  return text;
}

}  // namespace ios::devices::cpu
