// bench-serving's result table (SGLang's layout), as its tests check it.
#pragma once

#include <string>

namespace mlaserve::testing {

// Fails the test unless every label and section title of the table starts a line of `output`,
// in printed order.
void expect_full_table(const std::string& output);

}  // namespace mlaserve::testing
