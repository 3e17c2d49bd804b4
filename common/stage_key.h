// Reading a canonical stage key (StageSpec::Key()) back into its stage: the
// profiling DB stores keys only and derives a stage's description from its
// key when it is read (docs/profiling-db.md).
#pragma once

#include <string_view>

#include "common/stage.h"

namespace ios {

//! The spec whose key is `key`, with every op's output shape inferred:
//! ParseStageKey(spec.Key()).Key() == spec.Key() for every valid spec.
//! Throws ios::Error naming the byte offset and what was expected there, or
//! the op whose inputs do not fit.
StageSpec ParseStageKey(std::string_view key);

}  // namespace ios
