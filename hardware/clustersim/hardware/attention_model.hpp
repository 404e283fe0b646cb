// Fused causal attention (FlashAttention-style kernels: cuDNN, FlashAttention-2/3) timed from a
// profile's measured attention constants (hw.attention, calibrate/attention_fit.hpp fits them).
//
//   time = (F + tail_blocks x R x SMs) / (peak[dtype] x efficiency x load) + launch
//
// F is the pass's FLOPs, R the FLOPs of one block of kAttentionBlockRows queries walking the whole
// sequence in the same pass. With a causal mask the last query blocks walk every key while the
// first stop at once, so a kernel ends in a tail in which few SMs work; tail_blocks such walks, each
// on one SM at its share of the rate, stand for it (docs/training.md, "Operations of a layer").
#pragma once

#include "clustersim/common/units.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::hardware {

// Queries per thread block in fused attention kernels on Hopper and Ampere at head dims up to 128
// (FlashAttention-2, Dao 2023, section 3.3: blocks of 64 or 128 rows; FlashAttention-3, Shah et al.
// 2024, section 4: 128 x 128 tiles for head dim 128). The attention tail is counted in such blocks.
inline constexpr double kAttentionBlockRows = 128;
// FlashAttention's backward pass does 5 matrix products to the forward's 2, recomputing the
// scores (Dao 2023, FlashAttention-2, section 3.1.2 counts backward FLOPs as 2.5 x forward).
inline constexpr double kAttentionBackwardFlops = 2.5;
// The fitted tails of the measured cuDNN kernels lie below one block walk (0.75-0.81, fits of
// tests/data/calibrate/h200-device-2026-12-04/); calibrate's grid and a profile's tail_blocks go to
// 8 so that neither bounds a fit (calibrate notes a fit that reaches the end).
inline constexpr double kAttentionMaxTailBlocks = 8;

// A pass's FLOPs from the forward pass's.
constexpr double attention_pass_flops(double forward_flops, bool backward) { return backward ? kAttentionBackwardFlops * forward_flops : forward_flops; }

// Forward FLOPs of one block of kAttentionBlockRows queries walking `seq` keys: its QK^T (qk_dim)
// and PV (v_dim) products.
constexpr double attention_row_flops(double seq, double qk_dim, double v_dim) { return 2.0 * kAttentionBlockRows * seq * (qk_dim + v_dim); }

// The time of one fused attention kernel whose pass does `flops`, with `row_flops` for one query
// block's walk over the whole sequence (both already x 2.5 for a backward pass). Throws
// std::invalid_argument when the profile has no attention efficiency or lacks the dtype.
Seconds fused_attention_time(const HardwareProfile& hw, Flops flops, Flops row_flops, Dtype dtype, bool backward, Load load = Load::burst);

}  // namespace cs::hardware
