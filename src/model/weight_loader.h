// Reads checkpoint tensors into kernel weights: checks shapes against the config, copies only
// this rank's block, and stores it in the chosen format: the compute dtype (FP8 dequantized),
// FP8 kept as checkpoint codes and block scales, or quantized at load (FP8 blocks, INT8 rows,
// INT4/MXFP4 groups of a row).
#pragma once

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/sharding.h"

namespace mlaserve::model {

// --quantization: how the linear layers inside the model's layers are held. Auto is Fp8 for a
// checkpoint stored as FP8 and None otherwise.
enum class Quantization { Auto, None, Fp8, Int8, Int4, Mxfp4 };

const char* quantization_name(Quantization q);

// The formats a model is loaded in: dtype for activations and for every weight that is not
// quantized (lm_head unless quantize_lm_head, the per-head absorption matrices; the router is
// float32), quantization for the rest.
struct WeightFormat {
  kernels::WeightType dtype = kernels::WeightType::BF16;
  Quantization quantization = Quantization::Auto;
  bool quantize_lm_head = false;  // --quantize-lm-head: lm_head quantized like the layers
  // --quantization-group-size: columns per scale of int4 (32, 64 or 128; mxfp4's is 32).
  int64_t group_size = 32;
  WeightFormat(kernels::WeightType type, Quantization q = Quantization::Auto,  // NOLINT: implicit
               bool lm_head = false, int64_t group = 32)
      : dtype(type), quantization(q), quantize_lm_head(lm_head), group_size(group) {}
};

// format with quantization Auto made the checkpoint's: fp8 for an FP8 checkpoint, else none.
// Throws when quantize_lm_head comes without a quantization to apply.
WeightFormat resolve_weight_format(WeightFormat format, bool fp8_checkpoint);
// The same for the checkpoint cfg describes: an int4 (compressed-tensors) checkpoint's Auto is
// int4 at its group size.
WeightFormat resolve_weight_format(WeightFormat format, const ModelConfig& cfg);

// A tensor name less its ".weight" (compressed-tensors names modules: `ignore`, the packed
// tensors' prefix).
std::string module_name(const std::string& tensor);

// The type a weight of `kind` is held in under a resolved format. Quantized when --quantization
// asks and the kind may be (quantizable()); in a quantized (FP8 or int4) checkpoint only the
// tensors stored quantized are: the others were left in BF16 on purpose, and serving the
// checkpoint's exact values is the point of its format. lm_head (stored in BF16 in an FP8
// checkpoint) only with quantize_lm_head, then quantized at load whatever its storage. dtype
// otherwise.
kernels::WeightType held_type(const WeightFormat& format, WeightKind kind,
                              bool quantized_checkpoint, bool stored_quantized);

// Whether --quantization may quantize a weight of this kind. Every linear layer inside the
// layers may be, and the embedding table (a token's row is dequantized once per step: no compute
// cost, and on the bench model it is 14 % of the bf16 bytes; brown-tiny's validation NLL moved by
// under 0.01 % with it). lm_head stays in the compute dtype, as in DeepSeek-V3's FP8 release: its
// error would reach every logit directly. (An FP8 checkpoint's own BF16 tensors, its embedding
// among them, stay as stored: held_type.) --quantize-lm-head overrides this for lm_head.
bool quantizable(WeightKind kind);

// The type a weight of `kind` stored as `stored` is held in: held_type's, except that a
// checkpoint's FP4 weight stays FP4 (MXFP4) under every quantization (the checkpoint's own FP8,
// or int8/int4/mxfp4 at load): it is 4-bit already, and any other form would grow it for no
// accuracy. Only --quantization none widens it to --dtype.
kernels::WeightType stored_weight_type(const WeightFormat& format, WeightKind kind,
                                       bool quantized_checkpoint, StorageType stored);

// A 4-bit group's scale, and a value's code under it (round to nearest). INT4 as llama.cpp's
// Q4_0; MXFP4 as the OCP MX spec: scale 2^(floor(log2 amax) - 2), e2m1 codes clamped to ±6.
float four_bit_group_scale(kernels::WeightType type, const float* v, int64_t n);
uint8_t four_bit_code(kernels::WeightType type, float v, float scale);

class WeightLoader {
 public:
  // format must be resolved (resolve_weight_format); cfg: the checkpoint's config (FP8 blocks,
  // packed int4 and its group size).
  WeightLoader(const Checkpoint& checkpoint, const WeightFormat& format, const ModelConfig& cfg)
      : checkpoint_(checkpoint),
        format_(format),
        quantized_checkpoint_(cfg.quantized_checkpoint()),
        int4_group_(cfg.int4_group_size) {}
  // For a family with its own config: whether its checkpoint stores quantized weights.
  WeightLoader(const Checkpoint& checkpoint, const WeightFormat& format, bool quantized_checkpoint)
      : checkpoint_(checkpoint),
        format_(format),
        quantized_checkpoint_(quantized_checkpoint),
        int4_group_(0) {}

  kernels::WeightType dtype() const { return format_.dtype; }

  // An empty [rows, cols] weight for tensor `name` of `kind` (any one of those stacked into it)
  // in its held_type().
  kernels::Weight new_weight(const std::string& name, int64_t rows, int64_t cols,
                             WeightKind kind) const;

  // Checks that tensor `name` is [rows, cols], then copies `block` of it into dst starting at
  // row dst_row (dst has block.cols columns). Into an FP8/INT8 weight, also the scales of the
  // block's rows (appended after those of earlier blocks).
  void copy_block(const std::string& name, int64_t rows, int64_t cols, const Block& block,
                  kernels::Weight& dst, int64_t dst_row) const;

  // A whole [rows, cols] tensor as a new float32 weight.
  kernels::Weight matrix_f32(const std::string& name, int64_t rows, int64_t cols) const;

  // A 1-D tensor of `len` values as float32 (norm weights, router bias).
  std::vector<float> vector(const std::string& name, int64_t len) const;

 private:
  const TensorInfo& checked(const std::string& name, std::vector<int64_t> shape) const;
  const TensorInfo& checked_matrix(const std::string& name, int64_t rows, int64_t cols) const;
  const TensorInfo& scale_tensor(const TensorInfo& t, const std::vector<int64_t>& shape) const;
  const TensorInfo& fp4_scales(const TensorInfo& t) const;
  void check_stored_scales(const TensorInfo& t) const;
  // compressed-tensors stores a module's int4 weight as <module>.weight_packed (int32, 8 codes
  // each), .weight_scale and .weight_shape instead of <module>.weight.
  bool packed_int4(const std::string& name) const;
  const TensorInfo& checked_packed(const std::string& name, int64_t rows, int64_t cols) const;
  const TensorInfo& packed_scales(const TensorInfo& packed) const;
  void copy_stored_4bit(const TensorInfo& t, const TensorInfo& scale, int64_t group, const Block& b,
                        kernels::Weight& dst, int64_t dst_row) const;
  const TensorInfo& block_scales(const TensorInfo& t) const;
  void read_row(const TensorInfo& t, int64_t row, int64_t col_begin, int64_t cols,
                float* out) const;
  template <typename Body>
  static void on_row_ranges(const Block& b, Body body);
  void copy_dense(const TensorInfo& t, const Block& b, kernels::Weight& dst, int64_t dst_row) const;
  void copy_fp8(const TensorInfo& t, const Block& b, kernels::Weight& dst, int64_t dst_row) const;
  void copy_int8(const TensorInfo& t, const Block& b, kernels::Weight& dst, int64_t dst_row) const;
  void copy_4bit(const TensorInfo& t, const Block& b, kernels::Weight& dst, int64_t dst_row) const;
  float block_max(const TensorInfo& t, int64_t block_row, int64_t block_col) const;

  const Checkpoint& checkpoint_;
  WeightFormat format_;
  bool quantized_checkpoint_;
  int64_t int4_group_;  // a compressed-tensors checkpoint's group size, else 0
};

}  // namespace mlaserve::model
