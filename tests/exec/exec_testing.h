// Helpers for the execution layer's tests: one-step programs run on the
// reference device, a graph builder with channel slices, and a naive
// node-by-node evaluation of a graph (the oracle for network programs).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/graph.h"
#include "exec/device.h"
#include "exec/program.h"
#include "exec/weights.h"

namespace ios::exec::testing {

//! 0.5, 1.5, ... style deterministic values: distinct, both signs.
inline std::vector<float> Ramp(size_t n, float scale = 0.25f, float shift = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = scale * (static_cast<float>((i * 7) % 23) - 11.0f) + shift;
  }
  return v;
}

inline size_t Elements(const Shape& s, int batch = 1) {
  return static_cast<size_t>(batch) * s.c * s.h * s.w;
}

//! A program of one step reading whole buffers of `in_shapes` and writing a
//! whole buffer of `out_shape`, each buffer in its own slot.
inline Program OneStepProgram(const OpParams& op, const std::vector<Shape>& in_shapes,
                              Shape out_shape, std::vector<ConvWeights> weights = {}) {
  Program p;
  Step step;
  step.op = op;
  step.label = "step";
  for (const Shape& s : in_shapes) {
    p.inputs.push_back(static_cast<int>(p.buffers.size()));
    step.inputs.push_back({static_cast<int>(p.buffers.size()), 0, s.c});
    p.buffers.push_back({s, static_cast<int>(p.slot_elements.size()), "in"});
    p.slot_elements.push_back(static_cast<int64_t>(Elements(s)));
  }
  step.output = {static_cast<int>(p.buffers.size()), 0, out_shape.c};
  p.buffers.push_back({out_shape, static_cast<int>(p.slot_elements.size()), "out"});
  p.slot_elements.push_back(static_cast<int64_t>(Elements(out_shape)));
  p.outputs.push_back(step.output);
  if (!weights.empty()) step.weights = 0;
  p.weights = std::move(weights);
  p.stages.push_back({{Lane{{step}}}});
  return p;
}

//! Runs `program` once on the reference device with `inputs` (one vector
//! per program input) and returns every program output.
inline std::vector<std::vector<float>> RunOnReference(const Program& program,
                                                      const std::vector<std::vector<float>>& inputs,
                                                      int batch = 1) {
  auto device = MakeReferenceDevice();
  auto prepared = device->Prepare(program, batch);
  for (size_t i = 0; i < inputs.size(); ++i) prepared->Write(program.inputs.at(i), inputs[i]);
  prepared->TimedRuns(1);
  std::vector<std::vector<float>> outputs;
  for (const View& v : program.outputs) outputs.push_back(prepared->Read(v));
  return outputs;
}

//! One op applied to whole tensors on the reference device.
inline std::vector<float> RunOp(const OpParams& op, const std::vector<Shape>& in_shapes,
                                const std::vector<std::vector<float>>& inputs, int batch = 1,
                                std::vector<ConvWeights> weights = {}) {
  const Shape out = InferOpOutput(op, in_shapes, "test op");
  return RunOnReference(OneStepProgram(op, in_shapes, out, std::move(weights)), inputs, batch)[0];
}

inline ConvWeights Weights(int out, int in_per_group, int kh, int kw, std::vector<float> kernel,
                           std::vector<float> bias = {}) {
  ConvWeights w;
  w.out_channels = out;
  w.in_per_group = in_per_group;
  w.kernel_h = kh;
  w.kernel_w = kw;
  w.kernel = std::move(kernel);
  w.bias = std::move(bias);
  return w;
}

inline void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected,
                        double relative = 1e-5, const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tolerance = relative * std::max(1.0, std::fabs(static_cast<double>(expected[i])));
    ASSERT_NEAR(actual[i], expected[i], tolerance) << what << " at index " << i;
  }
}

//! Builds a graph node by node; inputs are terms of channel slices.
class GraphBuilder {
 public:
  explicit GraphBuilder(Shape input, std::string name = "test") {
    graph_.name = std::move(name);
    Node in;
    in.name = "in";
    in.op.kind = OpKind::kInput;
    in.output = input;
    graph_.nodes.push_back(in);
  }
  //! A slice of `producer`; end < 0: to its last channel.
  Slice S(NodeId producer, int begin = 0, int end = -1) const {
    return {producer, begin, end < 0 ? graph_.node(producer).output.c : end};
  }
  NodeId Add(const std::string& name, const OpParams& op, Inputs inputs) {
    Node node;
    node.name = name;
    node.op = op;
    node.inputs = std::move(inputs);
    std::vector<Shape> shapes;
    for (const Term& t : node.inputs) {
      const Shape& p = graph_.node(t.at(0).producer).output;
      shapes.push_back({t[0].channels(), p.h, p.w});
    }
    node.output = InferOpOutput(op, shapes, name);
    graph_.nodes.push_back(std::move(node));
    return static_cast<NodeId>(graph_.nodes.size()) - 1;
  }
  //! One block over every operator; shapes checked by InferShapes.
  Graph Done() {
    Block block;
    block.enter = 0;
    const NodeId last = static_cast<NodeId>(graph_.nodes.size()) - 1;
    for (NodeId id = 1; id < last; ++id) block.inner.push_back(id);
    block.exit = last;
    graph_.blocks = {block};
    InferShapes(graph_);
    return graph_;
  }

 private:
  Graph graph_;
};

//! Every node's output at `batch`, computed node by node: inputs assembled
//! with plain loops (slices summed, terms concatenated or combined), each
//! primitive op run alone on fresh buffers of the reference device. No
//! views, slots, lanes, merges or memory plan: the oracle for those.
inline std::vector<std::vector<float>> EvaluateNaively(const Graph& graph,
                                                       const WeightStore& weights,
                                                       const std::vector<float>& input, int batch) {
  std::vector<std::vector<float>> values(graph.nodes.size());
  values[0] = input;
  for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes.size()); ++id) {
    const Node& node = graph.nodes[id];
    // Each term summed, as batch x channels x h x w.
    std::vector<std::vector<float>> terms;
    std::vector<Shape> term_shapes;
    for (const Term& term : node.inputs) {
      const Shape& p0 = graph.node(term[0].producer).output;
      const Shape shape{term[0].channels(), p0.h, p0.w};
      std::vector<float> sum(Elements(shape, batch), 0.0f);
      const size_t plane = static_cast<size_t>(shape.h) * shape.w;
      for (const Slice& s : term) {
        const Shape& p = graph.node(s.producer).output;
        for (int n = 0; n < batch; ++n) {
          for (size_t i = 0; i < static_cast<size_t>(shape.c) * plane; ++i) {
            sum[n * shape.c * plane + i] += values[s.producer][(n * p.c + s.begin) * plane + i];
          }
        }
      }
      terms.push_back(std::move(sum));
      term_shapes.push_back(shape);
    }
    if (node.op.kind == OpKind::kEltwise) {
      std::vector<float> out = terms[0];
      for (size_t t = 1; t < terms.size(); ++t) {
        for (size_t i = 0; i < out.size(); ++i) {
          out[i] =
              node.op.eltwise == EltwiseType::kMul ? out[i] * terms[t][i] : out[i] + terms[t][i];
        }
      }
      values[id] = std::move(out);
      continue;
    }
    // Concatenate the terms along channels.
    const Shape in_shape = InputShape(term_shapes, node.name);
    const size_t plane = static_cast<size_t>(in_shape.h) * in_shape.w;
    std::vector<float> in(Elements(in_shape, batch));
    for (int n = 0; n < batch; ++n) {
      size_t offset = 0;
      for (size_t t = 0; t < terms.size(); ++t) {
        const size_t count = static_cast<size_t>(term_shapes[t].c) * plane;
        std::copy_n(terms[t].begin() + static_cast<std::ptrdiff_t>(n * count), count,
                    in.begin() + static_cast<std::ptrdiff_t>(n * in_shape.c * plane + offset));
        offset += count;
      }
    }
    std::vector<OpParams> chain =
        node.op.kind == OpKind::kSequential ? node.op.chain : std::vector<OpParams>{node.op};
    Shape shape = in_shape;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain[i].kind == OpKind::kIdentity) continue;
      std::vector<ConvWeights> w;
      if (chain[i].kind == OpKind::kConv) w.push_back(weights.At({id, static_cast<int>(i)}));
      in = RunOp(chain[i], {shape}, {in}, batch, std::move(w));
      shape = InferOpOutput(chain[i], {shape}, node.name);
    }
    values[id] = std::move(in);
  }
  return values;
}

}  // namespace ios::exec::testing
