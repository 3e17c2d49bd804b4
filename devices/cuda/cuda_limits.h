// Limits shared by the host side (cuda_api.h) and our kernels
// (cuda_kernels.cu, compiled by nvcc as C++17): one definition for both.
#pragma once

namespace ios::cuda {

//! The most channels one head may have: our attention kernel keeps a
//! head's query and its output's running sums in shared memory (2 x 4096
//! floats: 32 KiB of the 48 KiB a block gets without opting in). ViT's
//! heads have 64.
inline constexpr int kMaxAttentionHeadChannels = 4096;

}  // namespace ios::cuda
