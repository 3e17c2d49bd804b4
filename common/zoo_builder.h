// Internal to the model zoo (common/zoo*.cc); not part of the public API.
// A small builder that appends operators in topological order, keeps their
// output shapes as it goes and groups them into blocks (and parts).
#pragma once

#include <initializer_list>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/graph.h"

namespace ios::zoo {

constexpr Window Square(int k) { return Window{k, k}; }

//! A convolution with bias (dilation 1).
OpParams Conv(int out_channels, Window kernel, Window stride, Window padding, Activation act,
              int groups = 1);
OpParams Pool(PoolType type, Window kernel, Window stride, Window padding);
OpParams Relu();

//! Builds one Graph. Every operator must be added inside a block
//! (BeginBlock ... EndBlock); misuse is a bug and throws std::logic_error.
class GraphBuilder {
 public:
  static constexpr NodeId kInput = 0;

  //! Starts a graph whose node 0 is an input of shape `input`.
  GraphBuilder(std::string graph_name, Shape input);

  //! Inputs that read whole outputs. Of(a): one term; Sum({a, b}): one term
  //! adding a and b; Concat({{a}, {b, c}}): a concatenated with b + c.
  Inputs Of(NodeId node) const;
  Inputs Sum(const std::vector<NodeId>& nodes) const;
  Inputs Concat(std::initializer_list<std::initializer_list<NodeId>> terms) const;

  //! Appends an operator; computes its output shape. Names must be unique.
  NodeId Add(const std::string& name, OpParams op, Inputs inputs, std::string hint = "");
  NodeId AddConv(const std::string& name, Inputs inputs, int out_channels, Window kernel,
                 Window stride, Window padding, Activation act, int groups = 1);
  NodeId AddPool(const std::string& name, Inputs inputs, PoolType type, Window kernel,
                 Window stride, Window padding);
  //! Global average pool; like the reference, its kernel is the input's size.
  NodeId AddGlobalAvgPool(const std::string& name, NodeId input);
  NodeId AddIdentity(const std::string& name, Inputs inputs);
  NodeId AddRelu(const std::string& name, Inputs inputs);
  NodeId AddSequential(const std::string& name, std::string hint, Inputs inputs,
                       std::vector<OpParams> chain);
  //! relu -> 1x1-style conv (no activation), hint "ReluConv".
  NodeId AddReluConv(const std::string& name, Inputs inputs, int out_channels, Window kernel,
                     Window stride, Window padding);
  //! relu -> depthwise conv (stride, padding, dilation) -> pointwise 1x1
  //! conv to `out_channels`, hint "ReluSepConv" ("ReluDilConv" when dilated).
  NodeId AddReluSepConv(const std::string& name, Inputs inputs, int out_channels, Window kernel,
                        Window stride, Window padding, Window dilation = Square(1));

  const Shape& shape(NodeId node) const { return graph_.nodes.at(node).output; }
  //! Channels of the tensor an op reading `inputs` sees (terms concatenated).
  int Channels(const Inputs& inputs) const;

  //! Opens a block entered from the most recently added node (or the input).
  void BeginBlock();
  //! Closes the open block; the most recently added node is its exit.
  void EndBlock();
  //! Closes an explicit part of the open block: the operators added since
  //! the block began or the previous part. A block with parts must end with one.
  void EndPart();

  //! Runs InferShapes over the finished graph and hands it over.
  Graph Finish();

 private:
  NodeId last() const { return static_cast<NodeId>(graph_.nodes.size()) - 1; }

  Graph graph_;
  std::unordered_set<std::string> names_;
  bool in_block_ = false;
  NodeId block_first_ = -1;  // first operator of the open block
  NodeId part_first_ = -1;   // first operator of the open part
  std::vector<std::vector<NodeId>> parts_;
};

// Model builders, one per network (zoo.cc, zoo_nasnet.cc, zoo_randwire.cc);
// the generated ones are declared in zoo_randwire.h and zoo_darts.h.
Graph BuildInceptionV3();
Graph BuildSqueezeNet();
Graph BuildNasNetLarge();
Graph BuildRandWireLarge();

}  // namespace ios::zoo
