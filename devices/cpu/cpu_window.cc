// Swin's kinds on oneDNN: window attention and patch merging
// (space_to_depth). Both are mostly data movement, which oneDNN's reorder
// does between any two strided layouts of the same logical tensor: the
// layouts below are the whole trick.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/graph.h"
#include "common/op_kinds_transformer.h"
#include "devices/cpu/cpu_dnnl_terms.h"
#include "devices/cpu/cpu_transformer.h"
#include "exec/weights.h"

namespace ios::devices::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

//! A run of rows (or columns) of the rolled map that comes from one run of
//! the unrolled map's: windows [first_window, + windows), tokens [first_token,
//! + tokens) of each, the first of them at unrolled row first_pixel.
struct Span {
  int64_t first_window, windows, first_token, tokens, first_pixel;
};

// Rolling by `shift` moves the first `shift` rows to the end, inside the last
// window (shift < window): every window but the last is a plain strided run
// of the unrolled map, and the last is two.
std::vector<Span> Spans(int64_t extent, int64_t window, int64_t shift) {
  const int64_t count = extent / window;
  if (shift == 0) return {{0, count, 0, window, 0}};
  std::vector<Span> spans;
  if (count > 1) spans.push_back({0, count - 1, 0, window, shift});
  spans.push_back({count - 1, 1, 0, window - shift, extent - window + shift});
  spans.push_back({count - 1, 1, window - shift, shift, 0});
  return spans;
}

struct WindowGeometry {
  int64_t batch, h, w, window, shift;
  bool grid;  // windows of pixels h / window apart (MaxViT's grid attention)
  int64_t windows_across() const { return w / window; }
  int64_t windows() const { return h / window * windows_across(); }
  int64_t tokens() const { return window * window; }
};

//! Reorders between an NHWC map of `map_channels` channels per pixel (the
//! `channels` of interest starting at `map`) and a window-major temporary
//! {sample, window, token, channel} of `channels`, one call per pair of
//! spans, so that the roll costs no pass of its own.
void CopyWindows(StepBuilder& builder, std::vector<Call>& calls, const WindowGeometry& g,
                 float* map, int64_t map_channels, const memory& windowed, int64_t channels,
                 bool into_windows) {
  const int64_t across = g.windows_across();
  // A grid window's token rows are h / window rows apart, its windows one.
  const Dims map_strides = g.grid ? Dims{map_channels * g.h * g.w,
                                         g.w * map_channels,
                                         map_channels,
                                         g.h / g.window * g.w * map_channels,
                                         g.w / g.window * map_channels,
                                         1}
                                  : Dims{map_channels * g.h * g.w,
                                         g.window * g.w * map_channels,
                                         g.window * map_channels,
                                         g.w * map_channels,
                                         map_channels,
                                         1};
  const Dims window_strides{g.windows() * g.tokens() * channels,
                            across * g.tokens() * channels,
                            g.tokens() * channels,
                            g.window * channels,
                            channels,
                            1};
  for (const Span& rows : Spans(g.h, g.window, g.shift)) {
    for (const Span& cols : Spans(g.w, g.window, g.shift)) {
      // {sample, window row, window column, token row, token column, channel}
      const Dims dims{g.batch, rows.windows, cols.windows, rows.tokens, cols.tokens, channels};
      const memory on_map(memory::desc(dims, kF32, map_strides), builder.engine(),
                          map + (rows.first_pixel * g.w + cols.first_pixel) * map_channels);
      const int64_t at = ((rows.first_window * across + cols.first_window) * g.tokens() +
                          rows.first_token * g.window + cols.first_token) *
                         channels;
      const memory in_windows =
          builder.TempAlias(windowed, memory::desc(dims, kF32, window_strides), at);
      if (into_windows) {
        builder.Copy(calls, on_map, in_windows);
      } else {
        builder.Copy(calls, in_windows, on_map);
      }
    }
  }
}

//! The scores' addend, {windows, heads, token, token} (one window's worth
//! without a shift: the bias alone is the same in every window) as one row
//! {1, values}: the position bias plus -100 between tokens of different
//! regions of the rolled map. Built once: the mask's constants written
//! here, the bias added by a binary that broadcasts it over the windows.
//! The row owns its values: a call that reads it keeps them alive.
memory BiasAndMask(StepBuilder& builder, const WindowGeometry& g, int64_t heads,
                   const exec::ConvWeights& weights) {
  using op_kinds_detail::WindowRegion;
  const int64_t size = g.tokens();
  const int64_t windows = g.shift > 0 ? g.windows() : 1;
  const memory row = builder.Allocate(
      memory::desc(Dims{1, windows * heads * size * size}, kF32, Tag::ab), "the position bias");
  auto* const values = static_cast<float*>(row.get_data_handle());
  const auto h = static_cast<int>(g.h), w = static_cast<int>(g.w);
  const auto window = static_cast<int>(g.window), shift = static_cast<int>(g.shift);
  std::vector<int> region(static_cast<size_t>(size));
  for (int64_t at = 0; at < windows; ++at) {
    const int top = static_cast<int>(at / g.windows_across()) * window;
    const int left = static_cast<int>(at % g.windows_across()) * window;
    for (int t = 0; t < window * window; ++t) {
      region[t] = WindowRegion(top + t / window, h, window, shift) * 3 +
                  WindowRegion(left + t % window, w, window, shift);
    }
    for (int64_t head = 0; head < heads; ++head) {
      float* to = values + (at * heads + head) * size * size;
      for (int64_t i = 0; i < size; ++i) {
        for (int64_t j = 0; j < size; ++j) {
          to[i * size + j] = region[i] != region[j] ? -100.f : 0.f;
        }
      }
    }
  }
  const memory::desc table_desc(Dims{windows, heads, size, size}, kF32, Tag::abcd);
  const memory table(table_desc, builder.engine(), values);
  const memory::desc bias_desc(Dims{1, heads, size, size}, kF32, Tag::abcd);
  const memory bias(bias_desc, builder.engine(), const_cast<float*>(weights.kernel.data()));
  builder.Doing("binary::primitive_desc adding the position bias to the mask");
  // The default attribute: run once, here, with a scratchpad of its own.
  const dnnl::binary::primitive_desc add(
      dnnl::binary::desc(dnnl::algorithm::binary_add, table_desc, bias_desc, table_desc),
      builder.engine());
  builder.RunNow(dnnl::binary(add),
                 {{DNNL_ARG_SRC_0, table}, {DNNL_ARG_SRC_1, bias}, {DNNL_ARG_DST, table}});
  return row;
}

}  // namespace

// Inside the window-major temporary a window is a tokens x 3C matrix, so
// head h's queries, keys and values of every window of every sample are
// strided batches as attention's are over the whole map, with (sample x
// window) as matmul's first batch dimension.
void CompileWindowAttention(StepBuilder& builder, const exec::Step& step,
                            std::vector<Call>& calls) {
  const exec::View& in = step.inputs.at(0);
  const exec::View& out = step.output;
  const Shape& is = builder.ShapeOf(in);
  const Shape& os = builder.ShapeOf(out);
  const int64_t heads = IntAttribute(builder, step, "heads");
  const int64_t window = IntAttribute(builder, step, "window");
  const int64_t shift = IntAttribute(builder, step, "shift");
  const bool grid = IntAttribute(builder, step, "grid") != 0;
  const int64_t channels = out.channels;
  if (heads < 1 || channels < heads || channels % heads != 0 || in.channels != 3 * channels ||
      is.h != os.h || is.w != os.w || window < 1 || is.h % window != 0 || is.w % window != 0 ||
      shift < 0 || shift >= window || (grid && shift != 0)) {
    builder.Fail("window attention of " + std::to_string(heads) + " heads in " +
                 std::to_string(window) + "x" + std::to_string(window) + " windows shifted by " +
                 std::to_string(shift) + " cannot map " +
                 ShapeText(Shape{in.channels, is.h, is.w}) + " onto " +
                 ShapeText(Shape{out.channels, os.h, os.w}));
  }
  const WindowGeometry g{builder.batch(), is.h, is.w, window, shift, grid};
  const int64_t size = g.tokens();
  if (step.weights < 0 || static_cast<size_t>(step.weights) >= builder.program().weights.size()) {
    builder.Fail(KindName(step.op) + " has no weights");
  }
  const exec::ConvWeights& w = builder.program().weights[step.weights];
  if (w.kernel.size() != static_cast<size_t>(heads * size * size)) {
    builder.Fail(KindName(step.op) + " needs a position bias of " +
                 std::to_string(heads * size * size) + " values, not " +
                 std::to_string(w.kernel.size()));
  }
  const int64_t depth = channels / heads;
  const int64_t stacked = 3 * channels;
  const int64_t groups = g.batch * g.windows();  // matmul's first batch dimension
  const dnnl::engine& engine = builder.engine();
  const memory bias = BiasAndMask(builder, g, heads, w);

  const memory gathered = builder.Temp(memory::desc(Dims{groups * size * stacked}, kF32, Tag::a));
  CopyWindows(builder, calls, g, builder.DataOf(in), is.c, gathered, stacked, true);

  // {sample x window, head, token, feature}; the keys transposed.
  const Dims by_token{groups, heads, size, depth};
  const memory::desc stacked_by_token(by_token, kF32, Dims{size * stacked, depth, stacked, 1});
  const memory::desc keys_by_feature(Dims{groups, heads, depth, size}, kF32,
                                     Dims{size * stacked, depth, 1, stacked});
  const memory::desc mixed_by_token(by_token, kF32, Dims{size * channels, depth, channels, 1});
  const memory scores =
      builder.Temp(memory::desc(Dims{groups, heads, size, size}, kF32, Tag::abcd));

  AddScores(builder, calls, builder.TempAlias(gathered, stacked_by_token, 0),
            builder.TempAlias(gathered, keys_by_feature, channels), scores,
            op_kinds_detail::WindowAttentionScale(step.op.registered, depth), "the windows'");

  // The bias is the same for every window without a shift, and with one
  // bias and mask are the same for every sample: one row added to every
  // row of scores, the per-channel broadcast of a 2-D {rows, channels}
  // binary, which oneDNN's jit takes.
  const memory::desc bias_row = bias.get_desc();
  const int64_t row = bias_row.dims()[1];
  const memory::desc score_rows(Dims{groups * heads * size * size / row, row}, kF32, Tag::ab);
  const memory scores_as_rows = builder.TempAlias(scores, score_rows, 0);
  builder.Doing("binary::primitive_desc adding the position bias and mask to the scores");
  const dnnl::binary::primitive_desc add(
      dnnl::binary::desc(dnnl::algorithm::binary_add, score_rows, bias_row, score_rows),
      builder.attr(), engine);
  builder.Doing("creating the position bias' binary");
  builder.Add(
      calls, add, dnnl::binary(add),
      {{DNNL_ARG_SRC_0, scores_as_rows}, {DNNL_ARG_SRC_1, bias}, {DNNL_ARG_DST, scores_as_rows}});

  // Window-major again: the output's pixels are not a strided batch of
  // windows, so the products land in a temporary a reorder scatters.
  const memory mixed = builder.Temp(memory::desc(Dims{groups * size * channels}, kF32, Tag::a));
  AddWeightedValues(builder, calls, scores,
                    builder.TempAlias(gathered, stacked_by_token, 2 * channels),
                    builder.TempAlias(mixed, mixed_by_token, 0), "the windows'");
  CopyWindows(builder, calls, g, builder.DataOf(out), os.c, mixed, channels, false);
}

// Output pixel (y, x), channel (dx * block + dy) * C + c is input pixel
// (block y + dy, block x + dx), channel c: as dims {sample, y, x, dx, dy, c}
// both are strided views of the NHWC storage, so one reorder moves it all.
void CompileSpaceToDepth(StepBuilder& builder, const exec::Step& step, std::vector<Call>& calls) {
  const exec::View& in = step.inputs.at(0);
  const exec::View& out = step.output;
  const Shape& is = builder.ShapeOf(in);
  const Shape& os = builder.ShapeOf(out);
  const int64_t block = IntAttribute(builder, step, "block");
  const int64_t c = in.channels;
  if (block < 1 || is.h % block != 0 || is.w % block != 0 || os.h * block != is.h ||
      os.w * block != is.w || out.channels != c * block * block) {
    builder.Fail("space to depth by " + std::to_string(block) + " cannot map " +
                 ShapeText(Shape{in.channels, is.h, is.w}) + " onto " +
                 ShapeText(Shape{out.channels, os.h, os.w}));
  }
  const Dims dims{builder.batch(), os.h, os.w, block, block, c};
  const Dims from{int64_t{is.c} * is.h * is.w,
                  block * is.w * is.c,
                  block * is.c,
                  is.c,
                  int64_t{is.w} * is.c,
                  1};
  const Dims to{int64_t{os.c} * os.h * os.w, int64_t{os.w} * os.c, os.c, block * c, c, 1};
  builder.Copy(calls, memory(memory::desc(dims, kF32, from), builder.engine(), builder.DataOf(in)),
               memory(memory::desc(dims, kF32, to), builder.engine(), builder.DataOf(out)));
}

}  // namespace ios::devices::cpu
