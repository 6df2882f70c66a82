#include "runtime/plan.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.h"

namespace mlaserve::runtime {

namespace {

class ByteWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> bytes;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof(T));
    return v;
  }
  template <typename T>
  std::vector<T> get_vector() {
    std::vector<T> v(get<uint64_t>());
    take(v.data(), v.size() * sizeof(T));
    return v;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void take(void* out, size_t n) {
    if (n > bytes_.size() - at_)
      fail("internal: truncated control message ({} bytes)", bytes_.size());
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

void put_sampling(ByteWriter& w, const sampling::SamplingParams& p) {
  w.put(p.temperature);
  w.put(p.top_k);
  w.put(p.top_p);
  w.put(p.min_p);
  w.put(p.presence_penalty);
  w.put(p.frequency_penalty);
  w.put(p.repetition_penalty);
  w.put<uint8_t>(p.seed.has_value());
  w.put<uint64_t>(p.seed.value_or(0));
  w.put<uint32_t>(static_cast<uint32_t>(p.logit_bias.size()));
  for (const auto& [token, bias] : p.logit_bias) {
    w.put(token);
    w.put(bias);
  }
}

sampling::SamplingParams get_sampling(ByteReader& r) {
  sampling::SamplingParams p;
  p.temperature = r.get<float>();
  p.top_k = r.get<int>();
  p.top_p = r.get<float>();
  p.min_p = r.get<float>();
  p.presence_penalty = r.get<float>();
  p.frequency_penalty = r.get<float>();
  p.repetition_penalty = r.get<float>();
  const bool has_seed = r.get<uint8_t>() != 0;
  const auto seed = r.get<uint64_t>();
  if (has_seed) p.seed = seed;
  p.logit_bias.resize(r.get<uint32_t>());
  for (auto& [token, bias] : p.logit_bias) {
    token = r.get<int32_t>();
    bias = r.get<float>();
  }
  return p;
}

}  // namespace

int64_t GroupPlan::n_tokens() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += static_cast<int64_t>(s.new_tokens.size());
  return n;
}

bool GroupPlan::extend() const {
  for (const auto& s : seqs) {
    if (!s.is_decode()) return true;
  }
  return false;
}

int64_t PlannedSequence::n_mtp_rows() const {
  return drafts_next() ? static_cast<int64_t>(new_tokens.size())
                       : static_cast<int64_t>(mtp_tokens.size());
}

int64_t GroupPlan::n_mtp_tokens() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += s.n_mtp_rows();
  return n;
}

bool GroupPlan::mtp_extend() const {
  for (const auto& s : seqs) {
    if (s.n_mtp_rows() > 1 || (s.n_mtp_rows() == 1 && s.n_cached == 0)) return true;
  }
  return false;
}

int64_t GroupPlan::n_drafting() const {
  return std::count_if(seqs.begin(), seqs.end(),
                       [](const PlannedSequence& s) { return s.drafts_next(); });
}

std::vector<uint8_t> StepPlan::encode() const {
  ByteWriter w;
  w.put<uint8_t>(shutdown);
  w.put<uint64_t>(groups.size());
  for (const GroupPlan& g : groups) {
    w.put<uint64_t>(g.seqs.size());
    for (const PlannedSequence& s : g.seqs) {
      w.put(s.id);
      w.put(s.n_cached);
      w.put_vector(s.new_tokens);
      w.put_vector(s.kv_slots);
      w.put<uint8_t>(s.all_logits);
      w.put<uint8_t>(s.return_logits);
      w.put<uint8_t>(s.sample);
      put_sampling(w, s.sampling);
      w.put(s.top_logprobs);
      w.put_vector(s.mtp_tokens);
      w.put(s.spec_steps);
      w.put<uint8_t>(s.spec_verify);
      w.put(s.snapshot_key);
      w.put_vector(s.allowed_tokens);
    }
    w.put_vector(g.snapshot_ops);
  }
  w.put_vector(released);
  return std::move(w.bytes);
}

StepPlan StepPlan::decode(std::span<const uint8_t> bytes) {
  ByteReader r(bytes);
  StepPlan plan;
  plan.shutdown = r.get<uint8_t>() != 0;
  plan.groups.resize(r.get<uint64_t>());
  for (GroupPlan& g : plan.groups) {
    g.seqs.resize(r.get<uint64_t>());
    for (PlannedSequence& s : g.seqs) {
      s.id = r.get<uint64_t>();
      s.n_cached = r.get<int64_t>();
      s.new_tokens = r.get_vector<int32_t>();
      s.kv_slots = r.get_vector<int32_t>();
      s.all_logits = r.get<uint8_t>() != 0;
      s.return_logits = r.get<uint8_t>() != 0;
      s.sample = r.get<uint8_t>() != 0;
      s.sampling = get_sampling(r);
      s.top_logprobs = r.get<int32_t>();
      s.mtp_tokens = r.get_vector<int32_t>();
      s.spec_steps = r.get<int32_t>();
      s.spec_verify = r.get<uint8_t>() != 0;
      s.snapshot_key = r.get<int32_t>();
      s.allowed_tokens = r.get_vector<uint64_t>();
    }
    g.snapshot_ops = r.get_vector<SnapshotOp>();
  }
  plan.released = r.get_vector<uint64_t>();
  if (!r.done()) fail("internal: trailing bytes in a step plan");
  return plan;
}

std::vector<uint8_t> encode_results(const std::vector<SequenceResult>& results) {
  ByteWriter w;
  w.put<uint64_t>(results.size());
  for (const auto& res : results) {
    w.put(res.id);
    w.put(res.token);
    w.put_vector(res.logprobs);
    w.put_vector(res.top);
    w.put_vector(res.logits);
    w.put_vector(res.mtp_logits);
    w.put_vector(res.tokens);
    w.put_vector(res.drafts);
  }
  return std::move(w.bytes);
}

std::vector<SequenceResult> decode_results(std::span<const uint8_t> bytes) {
  ByteReader r(bytes);
  std::vector<SequenceResult> results(r.get<uint64_t>());
  for (auto& res : results) {
    res.id = r.get<uint64_t>();
    res.token = r.get<int32_t>();
    res.logprobs = r.get_vector<float>();
    res.top = r.get_vector<sampling::TokenLogprob>();
    res.logits = r.get_vector<float>();
    res.mtp_logits = r.get_vector<float>();
    res.tokens = r.get_vector<int32_t>();
    res.drafts = r.get_vector<int32_t>();
  }
  return results;
}

}  // namespace mlaserve::runtime
