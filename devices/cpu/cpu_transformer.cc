#include "devices/cpu/cpu_transformer.h"

#include <cmath>
#include <optional>
#include <string>

#include "common/op_kinds.h"
#include "devices/cpu/cpu_dnnl_terms.h"
#include "exec/weights.h"

namespace ios::devices::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

}  // namespace

int IntAttribute(const StepBuilder& builder, const exec::Step& step, std::string_view name) {
  const std::optional<int> value = AttributeOf(step.op.registered, name);
  if (!value) {
    builder.Fail(KindName(step.op) + " has no attribute " + std::string(name));
  }
  return *value;
}

// Every sample's tokens are the pixels of its view in NHWC storage: token t
// of channel k sits at t * (buffer channels) + k from the view's start, so
// head h's queries (or keys, or values) are a tokens x depth matrix at
// channel h * depth with row stride the buffer's channel count. Described
// that way, with the sample and the head as matmul's two batch dimensions,
// oneDNN reads them where they are: no copies, and one primitive for every
// head of every sample (its gemm takes strided batches).
void CompileAttention(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls) {
  const exec::View& in = step.inputs.at(0);
  const exec::View& out = step.output;
  const Shape& is = builder.ShapeOf(in);
  const Shape& os = builder.ShapeOf(out);
  const int64_t heads = IntAttribute(builder, step, "heads");
  const int64_t channels = out.channels;
  if (heads < 1 || channels < heads || channels % heads != 0 || in.channels != 3 * channels ||
      is.h != os.h || is.w != os.w) {
    builder.Fail("attention of " + std::to_string(heads) + " heads cannot map " +
                 ShapeText(Shape{in.channels, is.h, is.w}) + " onto " +
                 ShapeText(Shape{out.channels, os.h, os.w}));
  }
  const int64_t depth = channels / heads;
  const int64_t tokens = int64_t{is.h} * is.w;
  const int64_t batch = builder.batch();
  const dnnl::engine& engine = builder.engine();

  // {sample, head, token, feature}; the keys transposed: {.., feature, token}.
  const Dims by_token{batch, heads, tokens, depth};
  const memory::desc input_by_token(by_token, kF32, Dims{int64_t{is.c} * tokens, depth, is.c, 1});
  const memory::desc keys_by_feature(Dims{batch, heads, depth, tokens}, kF32,
                                     Dims{int64_t{is.c} * tokens, depth, 1, is.c});
  const memory::desc output_by_token(by_token, kF32, Dims{int64_t{os.c} * tokens, depth, os.c, 1});
  float* const queries = builder.DataOf(in);
  const memory scores =
      builder.Temp(memory::desc(Dims{batch, heads, tokens, tokens}, kF32, Tag::abcd));

  AddScores(builder, calls, memory(input_by_token, engine, queries),
            memory(keys_by_feature, engine, queries + channels), scores,
            1 / std::sqrt(static_cast<double>(depth)), "the");
  AddWeightedValues(builder, calls, scores, memory(input_by_token, engine, queries + 2 * channels),
                    memory(output_by_token, engine, builder.DataOf(out)), "the");
}

void AddScores(StepBuilder& builder, std::vector<Call>& calls, const memory& queries,
               const memory& keys, const memory& scores, double scale, const std::string& what) {
  dnnl::primitive_attr scaled = builder.NewAttr();
  scaled.set_output_scales(0, {static_cast<float>(scale)});
  builder.Doing("matmul::primitive_desc of " + what + " scores, " +
                DescribeDesc(queries.get_desc()) + " by " + DescribeDesc(keys.get_desc()));
  const dnnl::matmul::primitive_desc product(
      dnnl::matmul::desc(queries.get_desc(), keys.get_desc(), scores.get_desc()), scaled,
      builder.engine());
  builder.Doing("creating " + what + " scores' matmul");
  builder.Add(calls, product, dnnl::matmul(product),
              {{DNNL_ARG_SRC, queries}, {DNNL_ARG_WEIGHTS, keys}, {DNNL_ARG_DST, scores}});
}

void AddWeightedValues(StepBuilder& builder, std::vector<Call>& calls, const memory& scores,
                       const memory& values, const memory& out, const std::string& what) {
  // In place: a row of scores is dead once its weights are computed.
  builder.Doing("softmax_v2_forward::primitive_desc over " + what + " keys");
  const dnnl::softmax_v2_forward::primitive_desc softmax(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference,
                                     dnnl::algorithm::softmax_accurate, scores.get_desc(),
                                     scores.get_desc(), /*softmax_axis=*/3),
      builder.attr(), builder.engine());
  builder.Doing("creating the softmax over " + what + " keys");
  builder.Add(calls, softmax, dnnl::softmax_v2_forward(softmax),
              {{DNNL_ARG_SRC, scores}, {DNNL_ARG_DST, scores}});
  builder.Doing("matmul::primitive_desc of " + what + " weighted values, into " +
                DescribeDesc(out.get_desc()));
  const dnnl::matmul::primitive_desc weighted(
      dnnl::matmul::desc(scores.get_desc(), values.get_desc(), out.get_desc()), builder.attr(),
      builder.engine());
  builder.Doing("creating " + what + " weighted values' matmul");
  builder.Add(calls, weighted, dnnl::matmul(weighted),
              {{DNNL_ARG_SRC, scores}, {DNNL_ARG_WEIGHTS, values}, {DNNL_ARG_DST, out}});
}

// The output is a C x L x 1 map: token t of a sample at t * (buffer
// channels) from the view's start, the class token (when there is one)
// first. The patch tokens' part of it is the input's H x W map again, so
// it is described as {N, C, H, W} starting one token in.
void CompileEmbedTokens(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls) {
  const exec::View& in = step.inputs.at(0);
  const exec::View& out = step.output;
  const Shape& is = builder.ShapeOf(in);
  const Shape& os = builder.ShapeOf(out);
  const int64_t class_token = IntAttribute(builder, step, "class_token") != 0 ? 1 : 0;
  const int64_t c = in.channels;
  const int64_t patches = int64_t{is.h} * is.w;
  const int64_t tokens = patches + class_token;
  if (step.weights < 0 || static_cast<size_t>(step.weights) >= builder.program().weights.size()) {
    builder.Fail(KindName(step.op) + " has no weights");
  }
  const exec::ConvWeights& w = builder.program().weights[step.weights];
  if (out.channels != c || os.h != tokens || os.w != 1 || w.out_channels != c ||
      w.kernel_h != tokens || w.kernel.size() != static_cast<size_t>(c * tokens) ||
      w.bias.size() != static_cast<size_t>(class_token ? c : 0)) {
    builder.Fail(KindName(step.op) + " cannot map " + ShapeText(Shape{in.channels, is.h, is.w}) +
                 " onto " + ShapeText(Shape{out.channels, os.h, os.w}) +
                 " with a position embedding of " + std::to_string(w.kernel.size()) +
                 " values and a class token of " + std::to_string(w.bias.size()));
  }
  const dnnl::engine& engine = builder.engine();
  const int64_t batch = builder.batch();
  // The user's embedding is channel-major (c * L + t); the activations are
  // token-major. Reordered once, so the run's add reads both alike.
  const Dims patch_dims{1, c, is.h, is.w};
  const memory::desc patch_table(patch_dims, kF32, Tag::nhwc);
  const memory table = builder.Allocate(patch_table, "the position embedding");
  auto* const kernel = const_cast<float*>(w.kernel.data());
  builder.Doing("reordering the position embedding");
  const memory user_table(memory::desc(patch_dims, kF32, Dims{c * tokens, tokens, is.w, 1}), engine,
                          kernel + class_token);
  builder.RunNow(dnnl::reorder(user_table, table),
                 {{DNNL_ARG_FROM, user_table}, {DNNL_ARG_TO, table}});

  const memory src = builder.DenseInput(calls, in);
  const memory dst_view(memory::desc(Dims{batch, c, is.h, is.w}, kF32,
                                     Dims{int64_t{os.c} * tokens, 1, int64_t{is.w} * os.c, os.c}),
                        engine, builder.DataOf(out) + class_token * os.c);
  // oneDNN's jit binary takes one dense block of samples; the patch
  // tokens of a whole-buffer output are one only without a class token
  // between samples.
  const bool direct = builder.IsDense(out) && (batch == 1 || class_token == 0);
  const memory dst = direct ? dst_view : builder.Temp(src.get_desc());
  builder.Doing("binary::primitive_desc adding the position embedding");
  const dnnl::binary::primitive_desc add(
      dnnl::binary::desc(dnnl::algorithm::binary_add, src.get_desc(), patch_table, dst.get_desc()),
      builder.attr(), engine);
  builder.Doing("creating the position embedding's binary");
  builder.Add(calls, add, dnnl::binary(add),
              {{DNNL_ARG_SRC_0, src}, {DNNL_ARG_SRC_1, table}, {DNNL_ARG_DST, dst}});
  if (!direct) builder.Copy(calls, dst, dst_view);
  if (!class_token) return;

  // The class token's output is a constant: summed here with its position
  // embedding, then copied into every sample's first token, read with a
  // sample stride of 0 so that one reorder fills them all. The copy's
  // source owns the row: the call keeps it alive.
  const memory row =
      builder.Allocate(memory::desc(Dims{batch, c}, kF32, Dims{0, 1}), "the class token");
  const memory::desc row_desc(Dims{1, c}, kF32, Tag::ab);
  const memory bias(row_desc, engine, const_cast<float*>(w.bias.data()));
  const memory first_position(memory::desc(Dims{1, c}, kF32, Dims{c * tokens, tokens}), engine,
                              kernel);
  builder.Doing("binary::primitive_desc of the class token");
  // The default attribute: run once, here, with a scratchpad of its own.
  const dnnl::binary::primitive_desc sum(dnnl::binary::desc(dnnl::algorithm::binary_add, row_desc,
                                                            first_position.get_desc(), row_desc),
                                         engine);
  builder.RunNow(dnnl::binary(sum),
                 {{DNNL_ARG_SRC_0, bias},
                  {DNNL_ARG_SRC_1, first_position},
                  {DNNL_ARG_DST, memory(row_desc, engine, row.get_data_handle())}});
  builder.Copy(calls, row,
               memory(memory::desc(Dims{batch, c}, kF32, Dims{int64_t{os.c} * tokens, 1}), engine,
                      builder.DataOf(out)));
}

}  // namespace ios::devices::cpu
