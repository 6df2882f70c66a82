// The packed bf16 layout's product on AMX tiles (Intel Sapphire Rapids and later): a quantized
// weight's blocks, dequantized per call into that layout, and a bf16 weight's packed copy,
// multiplied where the AVX-512 BF16 dot product would run at about a seventh of the tiles' rate
// (107 against ~780 GFLOP/s per core on a 2-vCPU Xeon) and without oneDNN's per-call costs.
//
// A 64-row block of the layout is [K / 32] chunks of 16 word-rows (pairs of columns) by 64
// output rows, each word two bf16 values of one weight row: exactly four AMX B tiles side by
// side (16 rows of 64 bytes, 256 bytes apart). x rows are A tiles (16 rows x 32 bf16), and each
// C tile holds 16 rows of x by 16 weight rows in float32.
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/scratch.h"
#include "kernels/avx512_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemv.h"

namespace mlaserve::kernels {
namespace {

// Linux keeps the 8 KB tile state off for a process until it asks (arch_prctl, Linux 5.16+).
constexpr int kArchRequestXcompPermission = 0x1023;
constexpr int kXfeatureTileData = 18;

bool amx_bf16_present() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool tile = (edx >> 24) & 1, bf16 = (edx >> 22) & 1;
  return tile && bf16 &&
         syscall(SYS_arch_prctl, kArchRequestXcompPermission, kXfeatureTileData) == 0;
}

constexpr int64_t kBlockRows = 64;  // weight rows of a packed block: four B tiles
constexpr int64_t kBlockCols = 32;  // columns of K per packed chunk: one tile's K
constexpr int64_t kChunkValues = kBlockRows * kBlockCols;  // bf16 values of one chunk
// Bytes of a word-row of a chunk (64 words), which is also a row of the float32 partial sums.
constexpr int64_t kRowBytes = kBlockRows * 4;
constexpr int kStripRows = 16;  // rows of x per A (and C) tile
// 32-column chunks of K multiplied by every strip of x before the next: their B tiles
// (8 x 4 KB) stay in L1 while all of x's rows pass them.
constexpr int64_t kChunksPerPass = 8;

// The ldtilecfg operand: palette 1, per tile its bytes per row and rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-3: C (x_rows rows by 16 floats); 4: A (x_rows rows by 32 bf16); 5, 6: B (16 word-rows
// by 16 words), loaded in turn so that one loads while the other multiplies.
MLASERVE_AMX void configure_tiles(int x_rows) {
  TileConfig config;
  for (int t = 0; t < 7; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = static_cast<uint8_t>(t < 5 ? x_rows : 16);
  }
  _tile_loadconfig(&config);
}

// acc (x_rows x 64 floats, 256 bytes apart) += x's strip times chunks [0, chunks) of a block;
// `first`: acc starts from zero instead.
MLASERVE_AMX void strip_product(const bf16* x, int64_t x_row_bytes, const bf16* chunks,
                                int64_t count, float* acc, bool first) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(0, acc, kRowBytes);
    _tile_loadd(1, acc + 16, kRowBytes);
    _tile_loadd(2, acc + 32, kRowBytes);
    _tile_loadd(3, acc + 48, kRowBytes);
  }
  for (int64_t c = 0; c < count; ++c) {
    const bf16* w = chunks + c * kChunkValues;  // 16 word-rows; B tile j: words [16j, 16j + 16)
    _tile_loadd(4, x + c * kBlockCols, x_row_bytes);
    _tile_loadd(5, w, kRowBytes);
    _tile_dpbf16ps(0, 4, 5);
    _tile_loadd(6, w + 32, kRowBytes);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(5, w + 64, kRowBytes);
    _tile_dpbf16ps(2, 4, 5);
    _tile_loadd(6, w + 96, kRowBytes);
    _tile_dpbf16ps(3, 4, 6);
  }
  _tile_stored(0, acc, kRowBytes);
  _tile_stored(1, acc + 16, kRowBytes);
  _tile_stored(2, acc + 32, kRowBytes);
  _tile_stored(3, acc + 48, kRowBytes);
}

// Strips [first, last) of x (x_rows rows each, the tiles configured for them) times all of the
// block, a pass of kChunksPerPass chunks at a time.
MLASERVE_AMX void strips_product(const bf16* block, int64_t k_padded, const bf16* xb, int64_t first,
                                 int64_t last, float* acc) {
  const int64_t chunks = k_padded / kBlockCols;
  for (int64_t c0 = 0; c0 < chunks; c0 += kChunksPerPass) {
    const int64_t count = std::min(kChunksPerPass, chunks - c0);
    for (int64_t s = first; s < last; ++s) {
      strip_product(xb + s * kStripRows * k_padded + c0 * kBlockCols, k_padded * 2,
                    block + c0 * kChunkValues, count, acc + s * kStripRows * kBlockRows, c0 == 0);
    }
  }
}

}  // namespace

bool cpu_has_amx_bf16() {
  static const bool has = amx_bf16_present();
  return has && cpu_has_avx512_bf16();
}

MLASERVE_AMX void amx_packed_panel(const bf16* block, int64_t k_padded, const bf16* xb, int64_t m,
                                   float* y, int64_t ldy, int64_t rows) {
  thread_local std::vector<float> acc_buffer;
  const int64_t full = m / kStripRows, tail = m % kStripRows;
  float* acc = take(acc_buffer, (full + 1) * kStripRows * kBlockRows);
  configure_tiles(kStripRows);
  strips_product(block, k_padded, xb, 0, full, acc);
  if (tail > 0) {  // the last rows of x as a shorter strip: no tile reads past x's end
    configure_tiles(static_cast<int>(tail));
    strips_product(block, k_padded, xb, full, full + 1, acc);
  }
  _tile_release();
  for (int64_t i = 0; i < m; ++i)
    std::copy(acc + i * kBlockRows, acc + i * kBlockRows + rows, y + i * ldy);
}

}  // namespace mlaserve::kernels
