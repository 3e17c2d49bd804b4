// Internal to the cpu device: the registered kinds a vision transformer
// needs (common/op_kinds_transformer.h), as oneDNN calls: attention and the
// tokens' embedding in cpu_transformer.cc, Swin's window attention and
// patch merging in cpu_window.cc. Called by the lane compiler
// (cpu_primitives.cc) for a step of such a kind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "devices/cpu/cpu_primitives.h"
#include "devices/cpu/cpu_step_builder.h"
#include "exec/program.h"

namespace ios::devices::cpu {

//! The integer attribute `name` of the step's registered kind; Fail()s
//! when the kind declares none (a program from a bad key).
int IntAttribute(const StepBuilder& builder, const exec::Step& step, std::string_view name);

//! Scaled dot-product scores: `queries` {batch, head, token, feature} times
//! `keys` {batch, head, feature, token} times `scale` into `scores`
//! {batch, head, token, token}, one batched matmul (the scale as its output
//! scale: free, where scaling the queries would be one more pass). `what`
//! names the step's tokens in messages ("the windows'").
void AddScores(StepBuilder& builder, std::vector<Call>& calls, const dnnl::memory& queries,
               const dnnl::memory& keys, const dnnl::memory& scores, double scale,
               const std::string& what);

//! The softmax of `scores` over the keys, in place, then the scores times
//! `values` {batch, head, token, feature} into `out`: the rest of attention.
void AddWeightedValues(StepBuilder& builder, std::vector<Call>& calls, const dnnl::memory& scores,
                       const dnnl::memory& values, const dnnl::memory& out,
                       const std::string& what);

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

//! window_attention(heads, window, shift): a reorder of the queries, keys
//! and values into window-major order (undoing the roll on the way: up to
//! 3 x 3 strided pieces), attention's matmuls and softmax batched over
//! (sample x window, head), the position bias and Swin's mask added to the
//! scores by a binary from a table built at prepare, and reorders back
//! into the output view. Throws as CompileEmbedTokens does.
void CompileWindowAttention(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls);

//! space_to_depth(block): one reorder between 6-D strided views of the
//! input and output. Throws as CompileAttention does.
void CompileSpaceToDepth(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls);

}  // namespace ios::devices::cpu
