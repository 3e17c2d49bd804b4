#include "exec/weights.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "common/error.h"
#include "common/input_file.h"
#include "common/printable.h"
#include "common/slices.h"
#include "common/stage.h"

namespace ios::exec {
namespace {

// splitmix64: a tiny, well-mixed generator whose output is the same on every
// platform (std:: distributions are implementation-defined).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  //! Uniform in [-1, 1), from the top 24 bits (exact in a float).
  float Symmetric() {
    const auto bits = static_cast<int64_t>(Next() >> 40);  // [0, 2^24)
    return static_cast<float>(bits - (int64_t{1} << 23)) / static_cast<float>(1 << 23);
  }

 private:
  uint64_t state_;
};

// FNV-1a: a stable hash of a node name for per-node seeds.
uint64_t HashName(const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

uint64_t Mix(uint64_t a, uint64_t b) { return SplitMix64(a ^ (b * 0x9E3779B97F4A7C15ull)).Next(); }

// An operator of a graph that carries weights, with the input it reads.
struct WeightedAt {
  ConvSite site;
  const OpParams* op;
  Shape input;
};

// Every operator of `graph` carrying weights (convolutions, registered
// kinds declaring weights) in node, then chain order (shapes inferred).
std::vector<WeightedAt> WeightedOps(const Graph& graph) {
  std::vector<WeightedAt> out;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.nodes[id];
    if (!CarriesWeights(node.op) && node.op.kind != OpKind::kSequential) continue;
    const std::string where = "node " + Quoted(node.name);
    const OpKind first = node.op.kind == OpKind::kSequential && !node.op.chain.empty()
                             ? node.op.chain.front().kind
                             : node.op.kind;
    Shape in;
    try {
      in = ResolveNodeInput(graph, id, first, node.inputs).shape;
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    if (node.op.kind != OpKind::kSequential) {
      out.push_back({{id, 0}, &node.op, in});
      continue;
    }
    for (size_t i = 0; i < node.op.chain.size(); ++i) {
      const OpParams& step = node.op.chain[i];
      if (CarriesWeights(step)) out.push_back({{id, static_cast<int>(i)}, &step, in});
      in = InferOpOutput(step, {in}, where);
    }
  }
  return out;
}

int64_t KernelSize(const ConvWeights& w) {
  return int64_t{w.out_channels} * w.in_per_group * w.kernel_h * w.kernel_w;
}

// ---- The weights file: little-endian, see docs/execution.md. ----------------

constexpr char kMagic[8] = {'I', 'O', 'S', 'W', 'G', 'H', 'T', 'S'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxNameLength = 4096;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutFloats(std::string& out, const std::vector<float>& values) {
  for (float f : values) PutU32(out, std::bit_cast<uint32_t>(f));
}

class Reader {
 public:
  Reader(const std::string& data, const std::string& path) : data_(data), path_(path) {}
  uint32_t U32(const std::string& what) {
    Need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<uint32_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    }
    pos_ += 4;
    return v;
  }
  std::string Bytes(size_t n, const std::string& what) {
    Need(n, what);
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<float> Floats(int64_t n, const std::string& what) {
    Need(static_cast<size_t>(n) * 4, what);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& f : v) f = std::bit_cast<float>(U32(what));
    return v;
  }
  bool AtEnd() const { return pos_ == data_.size(); }
  size_t pos() const { return pos_; }

 private:
  void Need(size_t n, const std::string& what) {
    if (data_.size() - pos_ < n) {
      throw Error("weights file " + Quoted(path_) + ": truncated at byte " + std::to_string(pos_) +
                  " while reading " + what);
    }
  }
  const std::string& data_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<float> SeededValues(size_t count, uint64_t seed) {
  std::vector<float> values(count);
  SplitMix64 rng(seed);
  for (float& value : values) value = rng.Symmetric();
  return values;
}

bool CarriesWeights(const OpParams& op) {
  return op.kind == OpKind::kConv ||
         (op.kind == OpKind::kRegistered && HasWeights(op.registered.kind));
}

KindWeightShape ExpectedWeightShape(const OpParams& op, const Shape& input) {
  if (op.kind == OpKind::kConv) {
    return {.out_channels = op.conv.out_channels,
            .in_per_group = input.c / std::max(1, op.conv.groups),
            .kernel_h = op.conv.kernel.h,
            .kernel_w = op.conv.kernel.w,
            .bias = op.conv.bias};
  }
  if (op.kind == OpKind::kRegistered && HasWeights(op.registered.kind)) {
    return SpecOf(op.registered.kind).weights(op.registered, input);
  }
  return {};
}

ConvWeights RandomOpWeights(const OpParams& op, const Shape& input, uint64_t seed) {
  if (op.kind == OpKind::kConv) return RandomConvWeights(op.conv, input.c, seed);
  const KindWeightShape shape = ExpectedWeightShape(op, input);
  ConvWeights w;
  w.out_channels = shape.out_channels;
  w.in_per_group = shape.in_per_group;
  w.kernel_h = shape.kernel_h;
  w.kernel_w = shape.kernel_w;
  // Of the order of a trained embedding's values; a kind's weights are
  // added, not multiplied, so no fan-in scaling applies.
  SplitMix64 rng(seed);
  w.kernel.resize(static_cast<size_t>(shape.kernel_values()));
  for (float& v : w.kernel) v = 0.1f * rng.Symmetric();
  if (shape.bias) {
    w.bias.resize(static_cast<size_t>(shape.out_channels));
    for (float& v : w.bias) v = 0.1f * rng.Symmetric();
  }
  return w;
}

ConvWeights RandomConvWeights(const ConvParams& conv, int in_channels, uint64_t seed) {
  if (conv.groups < 1 || conv.out_channels < 1 || in_channels < 1 ||
      in_channels % conv.groups != 0 || conv.out_channels % conv.groups != 0 || conv.kernel.h < 1 ||
      conv.kernel.w < 1) {
    throw Error("RandomConvWeights: groups " + std::to_string(conv.groups) +
                " must divide input channels " + std::to_string(in_channels) +
                " and out_channels " + std::to_string(conv.out_channels) +
                ", kernel must be positive");
  }
  ConvWeights w;
  w.out_channels = conv.out_channels;
  w.in_per_group = in_channels / conv.groups;
  w.kernel_h = conv.kernel.h;
  w.kernel_w = conv.kernel.w;
  SplitMix64 rng(seed);
  const int64_t fan_in = int64_t{w.in_per_group} * w.kernel_h * w.kernel_w;
  const float bound = static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in)));
  w.kernel.resize(static_cast<size_t>(KernelSize(w)));
  for (float& v : w.kernel) v = bound * rng.Symmetric();
  if (conv.bias) {
    w.bias.resize(static_cast<size_t>(w.out_channels));
    for (float& v : w.bias) v = 0.1f * rng.Symmetric();
  }
  return w;
}

ConvWeights StackMergedWeights(const std::vector<ConvParams>& members,
                               const std::vector<const ConvWeights*>& weights) {
  if (members.size() != weights.size()) {
    throw Error("StackMergedWeights: " + std::to_string(members.size()) + " members but " +
                std::to_string(weights.size()) + " weights");
  }
  const ConvParams merged = MergedConv(members);  // throws when they do not merge
  ConvWeights out;
  out.out_channels = merged.out_channels;
  out.kernel_h = merged.kernel.h;
  out.kernel_w = merged.kernel.w;
  for (size_t i = 0; i < members.size(); ++i) {
    const ConvWeights* w = weights[i];
    const ConvParams& m = members[i];
    const std::string where = "StackMergedWeights: member " + std::to_string(i) + ": ";
    if (w == nullptr) throw Error(where + "no weights");
    if (w->out_channels != m.out_channels || w->kernel_h != m.kernel.h ||
        w->kernel_w != m.kernel.w || static_cast<int64_t>(w->kernel.size()) != KernelSize(*w) ||
        (!w->bias.empty() && static_cast<int>(w->bias.size()) != w->out_channels)) {
      throw Error(where + "weights shaped " + std::to_string(w->out_channels) + "x" +
                  std::to_string(w->in_per_group) + "x" + std::to_string(w->kernel_h) + "x" +
                  std::to_string(w->kernel_w) + " do not fit the convolution (out_channels " +
                  std::to_string(m.out_channels) + ", kernel " + std::to_string(m.kernel.h) + "x" +
                  std::to_string(m.kernel.w) + ")");
    }
    if (i == 0) out.in_per_group = w->in_per_group;
    if (w->in_per_group != out.in_per_group) {
      throw Error(where + "reads " + std::to_string(w->in_per_group) +
                  " input channels, member 0 reads " + std::to_string(out.in_per_group));
    }
  }
  const size_t kh = static_cast<size_t>(out.kernel_h), kw = static_cast<size_t>(out.kernel_w);
  const size_t in = static_cast<size_t>(out.in_per_group);
  out.kernel.assign(static_cast<size_t>(KernelSize(out)), 0.0f);
  if (merged.bias) out.bias.assign(static_cast<size_t>(out.out_channels), 0.0f);
  size_t oc_base = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const ConvWeights& w = *weights[i];
    const size_t mh = static_cast<size_t>(w.kernel_h), mw = static_cast<size_t>(w.kernel_w);
    // MergedConv checked kmax - k is even: the member sits in the middle.
    const size_t dy = (kh - mh) / 2, dx = (kw - mw) / 2;
    for (size_t o = 0; o < static_cast<size_t>(w.out_channels); ++o) {
      for (size_t c = 0; c < in; ++c) {
        for (size_t y = 0; y < mh; ++y) {
          for (size_t x = 0; x < mw; ++x) {
            out.kernel[(((oc_base + o) * in + c) * kh + y + dy) * kw + x + dx] =
                w.kernel[((o * in + c) * mh + y) * mw + x];
          }
        }
      }
      if (!w.bias.empty()) out.bias[oc_base + o] = w.bias[o];
    }
    oc_base += static_cast<size_t>(w.out_channels);
  }
  return out;
}

WeightStore WeightStore::Random(const Graph& graph, uint64_t seed) {
  WeightStore store;
  for (const WeightedAt& at : WeightedOps(graph)) {
    const uint64_t op_seed = Mix(Mix(seed, HashName(graph.node(at.site.node).name)),
                                 static_cast<uint64_t>(at.site.chain_index));
    store.Set(at.site, RandomOpWeights(*at.op, at.input, op_seed));
  }
  return store;
}

const ConvWeights& WeightStore::At(ConvSite site) const {
  const auto it = weights_.find(site);
  if (it == weights_.end()) {
    throw Error("weights: no weights for node #" + std::to_string(site.node) + " (chain index " +
                std::to_string(site.chain_index) + ")");
  }
  return it->second;
}

void WeightStore::Set(ConvSite site, ConvWeights weights) { weights_[site] = std::move(weights); }

void WeightStore::Save(const Graph& graph, const std::string& path) const {
  std::string out(kMagic, sizeof(kMagic));
  PutU32(out, kVersion);
  PutU32(out, static_cast<uint32_t>(weights_.size()));
  for (const auto& [site, w] : weights_) {
    if (site.node < 0 || site.node >= static_cast<NodeId>(graph.nodes.size())) {
      throw Error("weights file " + Quoted(path) + ": node #" + std::to_string(site.node) +
                  " is not in graph " + Quoted(graph.name));
    }
    const std::string& name = graph.node(site.node).name;
    PutU32(out, static_cast<uint32_t>(name.size()));
    out += name;
    PutU32(out, static_cast<uint32_t>(site.chain_index));
    PutU32(out, static_cast<uint32_t>(w.out_channels));
    PutU32(out, static_cast<uint32_t>(w.in_per_group));
    PutU32(out, static_cast<uint32_t>(w.kernel_h));
    PutU32(out, static_cast<uint32_t>(w.kernel_w));
    PutU32(out, w.bias.empty() ? 0 : 1);
    PutFloats(out, w.kernel);
    PutFloats(out, w.bias);
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) throw Error("weights file " + Quoted(path) + ": cannot be written");
}

WeightStore WeightStore::Load(const Graph& graph, const std::string& path) {
  const std::string file_where = "weights file " + Quoted(path);
  std::map<ConvSite, KindWeightShape> expected;
  for (const WeightedAt& at : WeightedOps(graph)) {
    expected.emplace(at.site, ExpectedWeightShape(*at.op, at.input));
  }
  // The exact size of this graph's weights file, and a little more (so that
  // trailing bytes are counted below), bounds what is read: a device or a
  // huge file is refused before it fills memory.
  std::uintmax_t size = sizeof(kMagic) + 2 * sizeof(uint32_t);
  for (const auto& [site, w] : expected) {
    size += 7 * sizeof(uint32_t) + graph.node(site.node).name.size() +
            sizeof(float) *
                static_cast<std::uintmax_t>(w.kernel_values() + (w.bias ? w.out_channels : 0));
  }
  constexpr std::uintmax_t kTrailingSlack = 64 << 10;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw Error(file_where + ": cannot be opened");
  const std::string data = ReadInputFile(path, "weights", size + kTrailingSlack);
  Reader in(data, path);
  if (in.Bytes(sizeof(kMagic), "the magic") != std::string(kMagic, sizeof(kMagic))) {
    throw Error(file_where + ": not an ios-farm weights file (bad magic)");
  }
  const uint32_t version = in.U32("the version");
  if (version != kVersion) {
    throw Error(file_where + ": version " + std::to_string(version) + ", expected " +
                std::to_string(kVersion));
  }
  const uint32_t count = in.U32("the entry count");
  WeightStore store;
  for (uint32_t e = 0; e < count; ++e) {
    const std::string entry = "entry " + std::to_string(e);
    const uint32_t name_length = in.U32(entry + " name length");
    if (name_length > kMaxNameLength) {
      throw Error(file_where + ": " + entry + ": name length " + std::to_string(name_length) +
                  " exceeds " + std::to_string(kMaxNameLength));
    }
    const std::string name = in.Bytes(name_length, entry + " name");
    const uint32_t chain_index = in.U32(entry + " chain index");
    const std::optional<NodeId> id = graph.Find(name);
    if (!id) {
      throw Error(file_where + ": node " + Quoted(name) + ": no such node in graph " +
                  Quoted(graph.name));
    }
    const std::string where =
        file_where + ": node " + Quoted(name) +
        (chain_index != 0 ? " (chain index " + std::to_string(chain_index) + ")" : "");
    const ConvSite site{*id, static_cast<int>(chain_index)};
    const auto it = chain_index <= (1u << 30) ? expected.find(site) : expected.end();
    if (it == expected.end()) throw Error(where + ": not an operator with weights");
    if (store.weights_.count(site)) throw Error(where + ": appears twice");
    ConvWeights w;
    const KindWeightShape& want = it->second;
    const auto field = [&](const char* field_name, int expected_value) {
      const uint32_t got = in.U32(where + " " + field_name);
      if (got != static_cast<uint32_t>(expected_value)) {
        throw Error(where + ": " + field_name + ": expected " + std::to_string(expected_value) +
                    ", got " + std::to_string(got));
      }
      return expected_value;
    };
    w.out_channels = field("out_channels", want.out_channels);
    w.in_per_group = field("in_per_group", want.in_per_group);
    w.kernel_h = field("kernel_h", want.kernel_h);
    w.kernel_w = field("kernel_w", want.kernel_w);
    const bool bias = field("bias", want.bias ? 1 : 0) != 0;
    w.kernel = in.Floats(KernelSize(w), where + " kernel");
    if (bias) w.bias = in.Floats(w.out_channels, where + " bias");
    store.weights_.emplace(site, std::move(w));
  }
  if (!in.AtEnd()) {
    throw Error(file_where + ": " + std::to_string(data.size() - in.pos()) +
                " unexpected bytes after the last entry");
  }
  for (const auto& [site, shape] : expected) {
    if (!store.weights_.count(site)) {
      throw Error(
          file_where + ": node " + Quoted(graph.node(site.node).name) +
          (site.chain_index != 0 ? " (chain index " + std::to_string(site.chain_index) + ")" : "") +
          ": missing");
    }
  }
  return store;
}

}  // namespace ios::exec
