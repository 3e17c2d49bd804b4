// oneDNN's terms for the IR's: which error kind a oneDNN failure is, an
// activation as oneDNN eltwise steps, a memory descriptor in words. Shared
// by the primitives of cpu_primitives.cc; no state.
#pragma once

#include <dnnl.hpp>
#include <string>
#include <vector>

#include "common/activation.h"
#include "common/measurement.h"

namespace ios::devices::cpu {

//! The measurement error kind of a oneDNN failure: unimplemented is
//! unsupported (reused by later searches), out of memory is out of memory,
//! anything else a backend failure.
MeasureError KindOf(const dnnl::error& e);

//! One oneDNN eltwise step: d = alg(s; alpha, beta).
struct Eltwise {
  dnnl::algorithm alg;
  float alpha = 0, beta = 0;
};

//! An activation of common/activation.h as oneDNN eltwise steps applied in
//! turn (oneDNN 2.6 has no hardsigmoid: a linear step, then a clip).
//! Throws exec::ExecError (unsupported) for Activation::kNone.
std::vector<Eltwise> EltwiseStepsOf(Activation act);

//! A memory descriptor for messages: dims, strides and inner blocks.
std::string DescribeDesc(const dnnl::memory::desc& desc);

}  // namespace ios::devices::cpu
