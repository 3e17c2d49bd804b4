// The registry of a tool that may link real device libraries (ios-worker,
// ios-run): BuiltinRegistry with the cuda kind opening real GPUs where this
// build has CUDA and cuDNN. ios-coordinator never links this: it must start
// on machines without those libraries.
#pragma once

#include "devices/registry.h"

namespace ios::devices {

//! Built once, never changed.
const Registry& LinkedRegistry();

}  // namespace ios::devices
