// Internal to the ONNX importer: the operators exporters write as formulas
// of several nodes (GELU, LayerNorm, the attention blocks of ViT, Swin and
// MaxViT), as their matchers find them before any node is imported
// (onnx_chains.h's FindFormulas) and the importer then reads them: the
// tensors each formula starts from and ends in, and the inner ones no
// other node may read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/activation.h"

namespace ios::onnx_import::detail {

//! MaxViT's block or grid attention as torchvision 0.14 exports it
//! (onnx_maxvit.cc): q, k, v Reshaped to [N, windows, w^2, heads, d] and
//! Transposed, k scaled, Einsum, Add of the bias, Softmax, Einsum, back.
struct SampleWindowAttentionMatch {
  std::string q, k, v;           // the token views the Reshapes read
  std::string heads;             // the shape of q's Reshape
  std::string k_heads, v_heads;  // k's and v's: the same heads expected
  std::string scale;             // the scalar k is multiplied by
  std::string bias;              // the relative position bias
  std::string top;               // the final Reshape's output
  std::vector<std::string> inner;
};

//! Swin's window attention as torchvision 0.14 exports it (onnx_windows.cc).
struct WindowAttentionMatch {
  std::string x;      // the q/k/v projection's output: windows' tokens [N*nW, w^2, 3C]
  std::string heads;  // the shape of its Reshape to [N*nW, w^2, 3, heads, d]
  std::string scale;  // the scalar q is multiplied by
  std::string bias;   // the relative position bias added to the scores
  std::string mask;   // the shifted windows' mask ("" without)
  std::string top;    // the Reshape of the result to [N*nW, w^2, C]
  std::vector<std::string> inner;
};

//! An attention block as PyTorch's nn.MultiheadAttention exports it
//! (onnx_attention.cc): from the Reshapes of the queries, keys and values
//! to [L, N*heads, d] to the Reshape of the result back to [L*N, C].
struct AttentionMatch {
  std::string q, k, v;             // the token views the Reshapes read
  std::string q_heads;             // the queries' Reshape output: [L, N*heads, d]
  std::string k_heads, v_heads;    // the keys' and values': the same heads expected
  std::string scale;               // the scalar the scores are divided (or multiplied) by
  bool multiplies = false;         // Mul by `scale` rather than Div
  std::string top;                 // the final Reshape's output
  std::vector<std::string> inner;  // the other nodes' outputs, read only by the chain
};

//! A GELU written as its formula (onnx_gelu.cc): the nodes from x to `top`.
struct GeluMatch {
  std::string x;  // the tensor the GELU is of
  Activation act = Activation::kGelu;
  int x_reads = 0;                 // how often the chain reads x
  std::string top;                 // the last Mul's output: the GELU's
  std::vector<std::string> inner;  // the other nodes' outputs, read only by the chain
};

//! A LayerNorm written as its formula (onnx_layernorm.cc), PyTorch's export
//! below opset 17: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps).
struct LayerNormMatch {
  std::string x;
  std::vector<int64_t> axes;  // both ReduceMeans'
  double eps = 0;
  std::string top;                 // the Div's output: the normalised x
  std::vector<std::string> inner;  // the other nodes' outputs, read only by the chain
};

}  // namespace ios::onnx_import::detail
