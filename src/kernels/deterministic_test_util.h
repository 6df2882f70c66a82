// Checks of the deterministic kernels (ops.h use_deterministic_kernels) that the kernel tests
// share: the batch-invariance of a matmul's rows (the mode's scope: DeterministicKernels).
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "kernels/kernel_mode_test_util.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

// The m values at which the fast matmul switches paths: GEMV tiles of 1-3 x rows, several
// tiles (4-16), and beyond the GEMV's range (oneDNN outside the deterministic mode).
inline constexpr int64_t kPathSwitchingRows[] = {1, 2, 3, 4, 8, 9, 16, 17, 33, 64};

// Every row of x[m_max, w.cols()] multiplied alone must give the same bits as within a batch of
// the first m rows, for each m of kPathSwitchingRows (m <= m_max), with one and three threads.
inline void expect_rows_equal_alone(const Weight& w, const std::vector<float>& x) {
  const int64_t k = w.cols(), n = w.rows();
  const int64_t m_max = static_cast<int64_t>(x.size()) / k;
  const int default_threads = omp_get_max_threads();
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> alone(static_cast<size_t>(m_max * n));
    for (int64_t i = 0; i < m_max; ++i) matmul(x.data() + i * k, 1, w, alone.data() + i * n);
    for (int64_t m : kPathSwitchingRows) {
      if (m > m_max) continue;
      std::vector<float> batch(static_cast<size_t>(m * n));
      matmul(x.data(), m, w, batch.data());
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_EQ(std::memcmp(batch.data() + i * n, alone.data() + i * n, n * sizeof(float)), 0)
            << "row " << i << " of m=" << m << " with " << threads << " threads";
      }
    }
  }
  omp_set_num_threads(default_threads);
}

}  // namespace mlaserve::kernels
