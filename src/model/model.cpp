#include "model/model.h"

#include "core/error.h"

namespace mlaserve::model {

std::vector<float> Model::mtp_forward(const StepInput&, const float*, KvStore&, StepComm&,
                                      std::vector<float>*) {
  fail("internal: {} has no multi-token-prediction module", info().model_type);
}

}  // namespace mlaserve::model
