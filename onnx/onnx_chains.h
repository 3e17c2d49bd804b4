// Internal to onnx/: walking an ONNX graph by producer and reader, for the
// matchers of operators that exporters write as formulas of several nodes
// (GELU in onnx_gelu.cc, LayerNorm in onnx_layernorm.cc). A formula is
// recognised before import, so its constants may still be Constant nodes.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "onnx/importer.h"

namespace ios::onnx_import::detail {

//! The constant the tensor `name` holds once imported, or nullptr.
const ConstTensor* ConstantValue(const std::map<std::string, Value>& values,
                                 const std::string& name);

class NodeChains {
 public:
  NodeChains(const ::onnx::GraphProto& graph, const std::map<std::string, Value>& values,
             const std::map<std::string, int>& readers);

  //! The node whose output `name` is, or nullptr (a graph input, an initializer).
  const ::onnx::NodeProto* ProducerOf(const std::string& name) const;

  //! The producer of `node`'s input `input`, or nullptr.
  const ::onnx::NodeProto* Producer(const ::onnx::NodeProto& node, int input) const;

  //! The producer of `node`'s input `input` when it is of type `op`.
  const ::onnx::NodeProto* Producer(const ::onnx::NodeProto& node, int input,
                                    const std::string& op) const;

  //! The one node reading `node`'s output, when it is a binary `op`.
  const ::onnx::NodeProto* SoleReader(const ::onnx::NodeProto& node, const std::string& op) const;

  //! A Transpose's `perm` attribute (empty when it has none).
  static std::vector<int64_t> PermOf(const ::onnx::NodeProto& node);

  //! How many inputs a matcher may read of an `op` node it found (2 for
  //! the binary operators, 1 otherwise); nodes with fewer are not found.
  static int Arity(const std::string& op);

  //! The one node reading `node`'s output, when it is an `op` with at least
  //! Arity(op) inputs.
  const ::onnx::NodeProto* OnlyReader(const ::onnx::NodeProto& node, const std::string& op) const;

  //! The operand of binary `node` that is not `name` (nullptr when neither is).
  static const std::string* Other(const ::onnx::NodeProto& node, const std::string& name);

  //! The operand of binary `node` beside a scalar constant equal to `value`.
  const std::string* ScalarOperand(const ::onnx::NodeProto& node, double value) const;

  //! The value of tensor `name` when it is a one-element float constant (an
  //! initializer, or a Constant node not yet imported).
  std::optional<double> Scalar(const std::string& name) const;

  //! Whether tensor `name` is a one-element float constant equal to `value`
  //! within the relative difference an exporter's float rounding leaves.
  bool IsScalar(const std::string& name, double value) const;

  //! The integers of tensor `name` when it is an integer constant.
  std::optional<std::vector<int64_t>> Ints(const std::string& name) const;

  //! How many nodes (and graph outputs) read tensor `name`.
  int Readers(const std::string& name) const;

  //! Each of `names` is read once: by the formula, so nothing else sees it.
  bool EachReadOnce(const std::vector<std::string>& names) const;

 private:
  //! The constant tensor `name` holds, read into `scratch` when it is a
  //! Constant node's; nullptr when it is not a constant.
  const ConstTensor* Constant(const std::string& name, ConstTensor& scratch) const;

  const std::map<std::string, Value>& values_;
  const std::map<std::string, int>& readers_;
  std::map<std::string, const ::onnx::NodeProto*> producer_;
  std::map<std::string, std::vector<const ::onnx::NodeProto*>> reader_of_;
};

//! Runs `match_at(node, match)` on every node of `graph` and keeps what it
//! recognises: each match under its formula's last output in `found`, the
//! formula's inner tensors in `inner` (they are never imported).
template <typename Match, typename MatchAt>
void FindFormulas(const ::onnx::GraphProto& graph, const MatchAt& match_at,
                  std::map<std::string, Match>& found, std::set<std::string>& inner) {
  for (const ::onnx::NodeProto& node : graph.node()) {
    Match match;
    if (!match_at(node, match)) continue;
    inner.insert(match.inner.begin(), match.inner.end());
    found[match.top] = std::move(match);
  }
}

}  // namespace ios::onnx_import::detail
