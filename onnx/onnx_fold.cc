// Constant folding at import: the shape arithmetic exporters write around
// reshapes and slices (Shape -> Gather -> Add -> Div -> Slice in ShuffleNet's
// channel split; Shape -> Gather -> Unsqueeze -> Concat -> Reshape in
// attention) computes numbers the importer knows already, since every
// feature map's shape is static. Those nodes become constants and vanish;
// only the operator that reads the result (a Slice, a Reshape) remains.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/printable.h"
#include "onnx/importer.h"

namespace ios::onnx_import::detail {
namespace {

// The largest constant folding makes: shape arithmetic is a handful of
// numbers, and a ConstantOfShape of a feature map's size is a few million.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 24;

// ONNX TensorProto element types the folder converts between.
constexpr int64_t kOnnxFloat = 1, kOnnxInt32 = 6, kOnnxInt64 = 7, kOnnxBool = 9, kOnnxDouble = 11;

int64_t Count(const std::vector<int64_t>& dims, const std::string& where) {
  const int64_t count = ElementCount(dims, where);
  if (count > kMaxFoldedElements) {
    throw Error(where + ": folding it would make a constant of " + std::to_string(count) +
                " elements (at most " + std::to_string(kMaxFoldedElements) + ")");
  }
  return count;
}

double At(const ConstTensor& t, int64_t i) {
  return t.is_float ? double{t.floats[static_cast<size_t>(i)]}
                    : static_cast<double>(t.ints[static_cast<size_t>(i)]);
}

ConstTensor Make(std::vector<int64_t> dims, bool is_float, const std::string& where) {
  ConstTensor t;
  t.dims = std::move(dims);
  t.has_values = true;
  t.is_float = is_float;
  const auto count = static_cast<size_t>(Count(t.dims, where));
  if (is_float)
    t.floats.resize(count);
  else
    t.ints.resize(count);
  return t;
}

//! `v` as an integer, saturated: a float beyond int64's range (or NaN) is
//! no index, and casting it would be undefined.
int64_t Saturated(double v) {
  if (!(v > -9.2e18)) return std::numeric_limits<int64_t>::min();
  if (v > 9.2e18) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

void Set(ConstTensor& t, int64_t i, double v) {
  if (t.is_float)
    t.floats[static_cast<size_t>(i)] = static_cast<float>(v);
  else
    t.ints[static_cast<size_t>(i)] = Saturated(v);
}

// Row-major strides of `dims`.
std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// `axis` of a rank-`rank` tensor, negative counting from the end.
size_t Axis(int64_t axis, size_t rank, const std::string& where) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    throw Error(where + ": axis " + std::to_string(axis) + " of a rank-" + std::to_string(r) +
                " tensor");
  }
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

// Numpy broadcasting of constants (ONNX's multidirectional rule): element
// i of the result is f of the elements of `in` that broadcast to i.
ConstTensor BroadcastAll(const std::vector<const ConstTensor*>& in, bool is_float,
                         const std::string& where,
                         const std::function<double(const std::vector<double>&)>& f) {
  size_t rank = 0;
  for (const ConstTensor* t : in) rank = std::max(rank, t->dims.size());
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t> out(rank, 1);
  for (const ConstTensor* t : in) {
    std::vector<int64_t>& d = dims.emplace_back(rank, 1);
    std::copy(t->dims.begin(), t->dims.end(),
              d.begin() + static_cast<int64_t>(rank - t->dims.size()));
    for (size_t i = 0; i < rank; ++i) {
      if (d[i] != out[i] && d[i] != 1 && out[i] != 1) {
        std::string texts;
        for (const ConstTensor* u : in) texts += (texts.empty() ? "" : " and ") + u->DimsText();
        throw Error(where + ": constants " + texts + " do not broadcast");
      }
      if (out[i] == 1) out[i] = d[i];  // 0 too: a size-0 axis broadcasts to 0
    }
  }
  ConstTensor r = Make(out, is_float, where);
  const std::vector<int64_t> so = Strides(out);
  std::vector<std::vector<int64_t>> strides;
  for (const auto& d : dims) strides.push_back(Strides(d));
  const int64_t n = Count(out, where);
  std::vector<double> operands(in.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t t = 0; t < in.size(); ++t) {
      int64_t at = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (dims[t][d] != 1) at += i / so[d] % out[d] * strides[t][d];
      }
      operands[t] = At(*in[t], at);
    }
    Set(r, i, f(operands));
  }
  return r;
}

ConstTensor Broadcast(const ConstTensor& a, const ConstTensor& b, const std::string& where,
                      const std::function<double(double, double)>& f) {
  return BroadcastAll({&a, &b}, a.is_float, where,
                      [&](const std::vector<double>& v) { return f(v[0], v[1]); });
}

}  // namespace

bool Importer::FoldConstants(const ::onnx::NodeProto& node, const Attributes& attrs) {
  const std::string& op = node.op_type();
  static const std::vector<std::string> kFoldable = {
      "Shape",     "Gather",    "Unsqueeze", "Squeeze", "Concat",
      "Cast",      "Add",       "Sub",       "Mul",     "Div",
      "Mod",       "Neg",       "Slice",     "Range",   "ConstantOfShape",
      "Reshape",   "Transpose", "Expand",    "Equal",   "Where",
      "ScatterND", "Pow",       "Not"};
  if (std::find(kFoldable.begin(), kFoldable.end(), op) == kFoldable.end()) return false;
  if (op == "Shape") return FoldShape(node, attrs);
  if (op == "Expand" && FoldExpandOfWeight(node, attrs)) return true;
  // Every present input a constant with values: otherwise the operator is
  // an operator on feature maps (Add, Concat, Slice...), imported as such.
  std::vector<const ConstTensor*> in;
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) {
      in.push_back(nullptr);
      continue;
    }
    const Value& v = Input(node, i);
    if (v.kind != Value::Kind::kConstant || !v.constant->has_values) return false;
    in.push_back(v.constant);
  }
  if (in.empty() || in[0] == nullptr) return false;
  const ConstTensor& x = *in[0];
  const auto input = [&](size_t i) -> const ConstTensor* {
    return i < in.size() ? in[i] : nullptr;
  };
  // An int64 list from input i or, below the opset that moved it there, the attribute.
  const auto list = [&](size_t i, const std::string& attr) {
    if (const ConstTensor* t = input(i)) {
      // Integers as they are: INT64_MAX (a Slice to the end) is no double.
      if (!t->is_float) return t->ints;
      std::vector<int64_t> values;
      for (const float f : t->floats) values.push_back(Saturated(f));
      return values;
    }
    return attrs.Ints(attr);
  };
  ConstTensor out;
  if (op == "Pow") {
    attrs.OnlyKnown({});
    if (input(1) == nullptr) return false;
    out = Broadcast(x, *in[1], where_, [](double a, double b) { return std::pow(a, b); });
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod") {
    attrs.OnlyKnown(op == "Mod" ? std::vector<std::string>{"fmod"} : std::vector<std::string>{});
    if (input(1) == nullptr) return false;
    const bool ints = !x.is_float;
    // Mod: fmod=1 keeps the dividend's sign (C's fmod); fmod=0, integers
    // only, the divisor's (Python's %, what PyTorch's shape arithmetic writes).
    const bool fmod = op == "Mod" && attrs.Int("fmod", 0, kFlagBounds) != 0;
    if (op == "Mod" && !fmod && !ints) {
      throw Error(where_ + ": Mod with fmod=0 of floats (ONNX requires fmod=1 for them)");
    }
    out = Broadcast(x, *in[1], where_, [&](double a, double b) -> double {
      if (op == "Add") return a + b;
      if (op == "Sub") return a - b;
      if (op == "Mul") return a * b;
      if (b == 0) throw Error(where_ + ": division by zero in a constant");
      if (op == "Div") return ints ? std::trunc(a / b) : a / b;  // integer Div truncates, as C's
      const double r = std::fmod(a, b);
      return !fmod && r != 0 && (r < 0) != (b < 0) ? r + b : r;
    });
  } else if (op == "ScatterND") {
    // Swin's attention mask is written region by region into zeros.
    attrs.OnlyKnown({"reduction"});
    const std::string reduction = attrs.String("reduction", "none");
    if (reduction != "none") {
      throw Error(where_ + ": ScatterND with reduction " + Quoted(reduction) +
                  " of constants: only reduction 'none' is folded");
    }
    if (input(1) == nullptr || input(2) == nullptr) return false;
    const ConstTensor& indices = *in[1];
    const ConstTensor& updates = *in[2];
    const size_t rank = x.dims.size();
    const auto k = indices.dims.empty() ? size_t{0} : static_cast<size_t>(indices.dims.back());
    if (indices.dims.empty() || k == 0 || k > rank) {
      throw Error(where_ + ": indices " + indices.DimsText() + " do not index " + x.DimsText());
    }
    const std::vector<int64_t> strides = Strides(x.dims);
    const int64_t slice = k == rank ? 1 : strides[k - 1];
    const int64_t tuples = indices.elements() / static_cast<int64_t>(k);
    if (updates.elements() != tuples * slice) {
      throw Error(where_ + ": updates " + updates.DimsText() + " for " + std::to_string(tuples) +
                  " slices of " + std::to_string(slice) + " values");
    }
    out = x;
    out.name.clear();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (size_t d = 0; d < k; ++d) {
        int64_t i = Saturated(At(indices, t * static_cast<int64_t>(k) + d));
        if (i < 0) i += x.dims[d];
        if (i < 0 || i >= x.dims[d]) {
          throw Error(where_ + ": index " + std::to_string(i) + " is outside an axis of " +
                      std::to_string(x.dims[d]));
        }
        offset += i * strides[d];
      }
      for (int64_t v = 0; v < slice; ++v) Set(out, offset + v, At(updates, t * slice + v));
    }
  } else if (op == "Equal") {
    attrs.OnlyKnown({});
    if (input(1) == nullptr) return false;
    out = BroadcastAll({&x, in[1]}, false, where_,
                       [](const std::vector<double>& v) { return v[0] == v[1] ? 1.0 : 0.0; });
  } else if (op == "Where") {
    attrs.OnlyKnown({});
    if (input(1) == nullptr || input(2) == nullptr) return false;
    out = BroadcastAll({&x, in[1], in[2]}, in[1]->is_float, where_,
                       [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
  } else if (op == "Expand") {
    attrs.OnlyKnown({});
    if (input(1) == nullptr) return false;
    // The target shape as a tensor of its own, broadcast against x.
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < in[1]->elements(); ++i) shape.push_back(Saturated(At(*in[1], i)));
    const ConstTensor target = Make(shape, false, where_);
    out = BroadcastAll({&x, &target}, x.is_float, where_,
                       [](const std::vector<double>& v) { return v[0]; });
  } else if (op == "Not") {
    attrs.OnlyKnown({});
    out = Make(x.dims, false, where_);
    for (int64_t i = 0; i < x.elements(); ++i) Set(out, i, At(x, i) == 0 ? 1 : 0);
  } else if (op == "Neg") {
    attrs.OnlyKnown({});
    out = Make(x.dims, x.is_float, where_);
    for (int64_t i = 0; i < x.elements(); ++i) Set(out, i, -At(x, i));
  } else if (op == "Cast") {
    attrs.OnlyKnown({"to", "saturate"});
    const int64_t to = attrs.Int("to", 0);
    if (to != kOnnxFloat && to != kOnnxDouble && to != kOnnxInt32 && to != kOnnxInt64 &&
        to != kOnnxBool) {
      throw Error(where_ + ": Cast of a constant to element type " + std::to_string(to) +
                  ": only float, double, int32, int64 and bool are folded");
    }
    out = Make(x.dims, to == kOnnxFloat || to == kOnnxDouble, where_);
    for (int64_t i = 0; i < x.elements(); ++i) {
      Set(out, i, to == kOnnxBool ? (At(x, i) != 0 ? 1.0 : 0.0) : At(x, i));
    }
  } else if (op == "Gather") {
    attrs.OnlyKnown({"axis"});
    if (input(1) == nullptr) return false;
    const ConstTensor& indices = *in[1];
    const size_t axis = Axis(attrs.Int("axis", 0), x.dims.size(), where_);
    std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
    dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
    dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
    out = Make(dims, x.is_float, where_);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= x.dims[d];
    for (size_t d = axis + 1; d < x.dims.size(); ++d) inner *= x.dims[d];
    const int64_t extent = x.dims[axis], picks = indices.elements();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t p = 0; p < picks; ++p) {
        int64_t k = Saturated(At(indices, p));
        if (k < 0) k += extent;
        if (k < 0 || k >= extent) {
          throw Error(where_ + ": index " + std::to_string(At(indices, p)) +
                      " is outside an axis of " + std::to_string(extent));
        }
        for (int64_t i = 0; i < inner; ++i) {
          Set(out, (o * picks + p) * inner + i, At(x, (o * extent + k) * inner + i));
        }
      }
    }
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    attrs.OnlyKnown({"axes"});
    const std::vector<int64_t> axes = list(1, "axes");
    std::vector<int64_t> dims = x.dims;
    if (op == "Unsqueeze") {
      const size_t rank = dims.size() + axes.size();
      std::vector<bool> added(rank, false);
      for (int64_t a : axes) added[Axis(a, rank, where_)] = true;
      dims.clear();
      size_t next = 0;
      for (size_t d = 0; d < rank; ++d) dims.push_back(added[d] ? 1 : x.dims[next++]);
    } else {
      std::vector<bool> removed(dims.size(), axes.empty());
      for (int64_t a : axes) removed[Axis(a, dims.size(), where_)] = true;
      dims.clear();
      for (size_t d = 0; d < x.dims.size(); ++d) {
        if (removed[d] && x.dims[d] != 1 && !axes.empty()) {
          throw Error(where_ + ": squeezes axis " + std::to_string(d) + " of extent " +
                      std::to_string(x.dims[d]));
        }
        if (!(removed[d] && x.dims[d] == 1)) dims.push_back(x.dims[d]);
      }
    }
    out = x;
    out.dims = dims;
  } else if (op == "Transpose") {
    attrs.OnlyKnown({"perm"});
    const size_t rank = x.dims.size();
    std::vector<int64_t> perm = attrs.Ints("perm");
    if (perm.empty()) {  // ONNX's default: the axes reversed
      for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    std::vector<size_t> axes;
    std::vector<bool> seen(rank, false);
    for (int64_t a : perm) {
      const size_t d = Axis(a, rank, where_);
      if (seen[d] || perm.size() != rank) {
        throw Error(where_ + ": perm " + IntsText(perm) + " is not a permutation of " +
                    std::to_string(rank) + " axes");
      }
      seen[d] = true;
      axes.push_back(d);
    }
    std::vector<int64_t> dims;
    for (size_t d : axes) dims.push_back(x.dims[d]);
    out = Make(dims, x.is_float, where_);
    const std::vector<int64_t> so = Strides(dims), sx = Strides(x.dims);
    for (int64_t i = 0; i < Count(dims, where_); ++i) {
      int64_t from = 0;
      for (size_t d = 0; d < rank; ++d) from += i / so[d] % dims[d] * sx[axes[d]];
      Set(out, i, At(x, from));
    }
  } else if (op == "Reshape") {
    // A constant reshaped (F.pad's pads arrive so): the same values, new dims.
    attrs.OnlyKnown({"allowzero"});
    if (input(1) == nullptr) return false;
    const bool allowzero = attrs.Int("allowzero", 0, kFlagBounds) != 0;
    std::vector<int64_t> dims = list(1, "shape");
    int64_t known = 1;
    int inferred = -1;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] == 0 && !allowzero) {
        if (d >= x.dims.size())
          throw Error(where_ + ": shape " + IntsText(dims) + ": no dim to copy");
        dims[d] = x.dims[d];
      }
      if (dims[d] == -1) {
        if (inferred >= 0) throw Error(where_ + ": shape " + IntsText(dims) + " has two -1s");
        inferred = static_cast<int>(d);
      } else if (dims[d] < 0) {
        throw Error(where_ + ": shape " + IntsText(dims) + " has a negative size");
      } else {
        known *= dims[d];
      }
    }
    if (inferred >= 0) dims[static_cast<size_t>(inferred)] = known == 0 ? 0 : x.elements() / known;
    if (ElementCount(dims, where_) != x.elements()) {
      throw Error(where_ + ": reshaping the constant " + x.DimsText() + " to " + IntsText(dims) +
                  " changes its element count");
    }
    out = x;
    out.dims = dims;
  } else if (op == "Concat") {
    attrs.OnlyKnown({"axis"});
    const size_t axis = Axis(attrs.Int("axis", 0), x.dims.size(), where_);
    std::vector<int64_t> dims = x.dims;
    dims[axis] = 0;
    for (const ConstTensor* t : in) {
      if (t == nullptr || t->dims.size() != x.dims.size() || t->is_float != x.is_float) {
        throw Error(where_ + ": constants of different ranks or types");
      }
      dims[axis] += t->dims[axis];
    }
    out = Make(dims, x.is_float, where_);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= dims[d];
    for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
    int64_t i = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (const ConstTensor* t : in) {
        const int64_t run = t->dims[axis] * inner;
        for (int64_t k = 0; k < run; ++k) Set(out, i++, At(*t, o * run + k));
      }
    }
  } else if (op == "Slice") {
    attrs.OnlyKnown({"starts", "ends", "axes"});
    std::vector<int64_t> starts = list(1, "starts"), ends = list(2, "ends"), axes = list(3, "axes");
    std::vector<int64_t> steps = list(4, "steps");
    if (axes.empty()) {
      for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    }
    std::vector<int64_t> first(x.dims.size(), 0), step(x.dims.size(), 1), dims = x.dims;
    for (size_t k = 0; k < axes.size() && k < starts.size() && k < ends.size(); ++k) {
      const size_t d = Axis(axes[k], x.dims.size(), where_);
      const int64_t n = x.dims[d], s = k < steps.size() ? steps[k] : 1;
      if (s == 0) throw Error(where_ + ": a Slice step of 0");
      // ONNX's bounds: clamped to [0, n] going forward, to [-1, n - 1]
      // going backward (a negative step walks from starts down to ends).
      const int64_t low = s > 0 ? 0 : -1, high = s > 0 ? n : n - 1;
      const int64_t b = std::clamp(starts[k] < 0 ? starts[k] + n : starts[k], int64_t{0}, high);
      const int64_t e = std::clamp(ends[k] < 0 ? ends[k] + n : ends[k], low, high);
      first[d] = b;
      step[d] = s;
      dims[d] = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e - s - 1) / -s : 0);
    }
    out = Make(dims, x.is_float, where_);
    const std::vector<int64_t> so = Strides(dims), sx = Strides(x.dims);
    for (int64_t i = 0; i < Count(dims, where_); ++i) {
      int64_t from = 0;
      for (size_t d = 0; d < dims.size(); ++d)
        from += (first[d] + i / so[d] % dims[d] * step[d]) * sx[d];
      Set(out, i, At(x, from));
    }
  } else if (op == "Range") {
    attrs.OnlyKnown({});
    if (input(1) == nullptr || input(2) == nullptr) return false;
    const double start = At(x, 0), limit = At(*in[1], 0), delta = At(*in[2], 0);
    if (delta == 0) throw Error(where_ + ": Range with a delta of 0");
    const auto n = static_cast<int64_t>(std::max(0.0, std::ceil((limit - start) / delta)));
    out = Make({n}, x.is_float, where_);
    for (int64_t i = 0; i < n; ++i) Set(out, i, start + static_cast<double>(i) * delta);
  } else {  // ConstantOfShape
    attrs.OnlyKnown({"value"});
    ConstTensor fill;
    fill.has_values = true;
    fill.floats = {0.0f};
    if (const auto value = attrs.Tensor("value")) fill = ReadTensor(*value, where_);
    if (!fill.has_values || fill.elements() != 1) {
      throw Error(where_ + ": its value must be one number");
    }
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < x.elements(); ++i) dims.push_back(Saturated(At(x, i)));
    out = Make(dims, fill.is_float, where_);
    for (int64_t i = 0; i < Count(dims, where_); ++i) Set(out, i, At(fill, 0));
  }
  out.name = node.output(0);
  ++folded_;
  ConstTensor& held = held_.emplace_back(std::move(out));
  Define(node, {Value::Kind::kConstant, {}, {}, {0, 0}, &held, {}});
  return true;
}

//! Expand of a weight exported without its values (ViT's class token with
//! export_params=False): a weight without values of the expanded shape.
bool Importer::FoldExpandOfWeight(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({});
  if (node.input_size() != 2) return false;
  const Value& x = Input(node, 0);
  const Value& shape = Input(node, 1);
  if (x.kind != Value::Kind::kConstant || x.constant->has_values ||
      shape.kind != Value::Kind::kConstant || !shape.constant->has_values) {
    return false;
  }
  std::vector<int64_t> target;
  for (int64_t i = 0; i < shape.constant->elements(); ++i) {
    target.push_back(Saturated(At(*shape.constant, i)));
  }
  const std::vector<int64_t>& from = x.constant->dims;
  const size_t rank = std::max(from.size(), target.size());
  std::vector<int64_t> dims(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i + from.size() >= rank ? from[i + from.size() - rank] : 1;
    const int64_t b = i + target.size() >= rank ? target[i + target.size() - rank] : 1;
    if (a != b && a != 1 && b != 1) {
      throw Error(where_ + ": " + x.constant->DimsText() + " does not expand to " +
                  IntsText(target));
    }
    dims[i] = a == 1 ? b : a;
  }
  ConstTensor out;
  out.name = node.output(0);
  out.dims = dims;
  ElementCount(dims, where_);
  ++folded_;
  ConstTensor& held = held_.emplace_back(std::move(out));
  Define(node, {Value::Kind::kConstant, {}, {}, {0, 0}, &held, {}});
  return true;
}

//! Every feature map's shape is static: Shape is [N, C, H, W] (N the batch
//! the model is imported at; the IR itself has none), or [N, C*H*W]
//! flattened, or a constant's dims.
bool Importer::FoldShape(const ::onnx::NodeProto& node, const Attributes& attrs) {
  attrs.OnlyKnown({"start", "end"});
  const Value& x = Input(node, 0);
  const std::vector<int64_t> dims = OnnxDims(x, batch_);
  const auto rank = static_cast<int64_t>(dims.size());
  const auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
  const int64_t begin = clamp(attrs.Int("start", 0)), end = clamp(attrs.Int("end", rank));
  ConstTensor out = Make({std::max<int64_t>(end - begin, 0)}, false, where_);
  for (int64_t i = begin; i < end; ++i) out.ints[static_cast<size_t>(i - begin)] = dims[i];
  out.name = node.output(0);
  ++folded_;
  ConstTensor& held = held_.emplace_back(std::move(out));
  Define(node, {Value::Kind::kConstant, {}, {}, {0, 0}, &held, {}});
  return true;
}

}  // namespace ios::onnx_import::detail
