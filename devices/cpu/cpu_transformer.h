// Internal to the cpu device: the registered kinds a vision transformer
// needs (common/op_kinds_transformer.h), as oneDNN calls. Called by the lane
// compiler (cpu_primitives.cc) for a step of such a kind.
#pragma once

#include <vector>

#include "devices/cpu/cpu_primitives.h"
#include "devices/cpu/cpu_step_builder.h"
#include "exec/program.h"

namespace ios::devices::cpu {

//! attention(heads) on every sample: two batched matmuls over (sample,
//! head) reading the queries, keys and values in place from the input view,
//! the second writing the output view, with a softmax over the keys between
//! them on a temporary of scores. Throws exec::ExecError (backend failure)
//! for a step whose views do not fit the kind, dnnl::error from oneDNN.
void CompileAttention(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls);

//! embed_tokens(class_token): the position embedding, reordered at prepare
//! into the activations' token-major layout, added to the input's tokens
//! by a binary; the class token plus its embedding, summed at prepare,
//! copied into every sample's first token by a reorder. Throws as
//! CompileAttention does, and when the step's weights do not fit.
void CompileEmbedTokens(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls);

}  // namespace ios::devices::cpu
