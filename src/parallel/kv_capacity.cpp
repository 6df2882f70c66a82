#include "parallel/kv_capacity.h"

#include "cache/latent_kv_pool.h"

namespace mlaserve::parallel {

KvCapacity kv_capacity(const Topology& topology, const model::ModelConfig& config, KvDtype kv_dtype,
                       int64_t budget_bytes_per_rank, bool mtp_layer) {
  KvCapacity c;
  c.bytes_per_token =
      cache::LatentKvPool::bytes_per_token(config.num_hidden_layers + (mtp_layer ? 1 : 0),
                                           config.kv_cache_dim(), kv_dtype, config.index_key_dim());
  c.index_bytes_per_token = c.bytes_per_token - cache::LatentKvPool::bytes_per_token(
                                                    config.num_hidden_layers + (mtp_layer ? 1 : 0),
                                                    config.kv_cache_dim(), kv_dtype);
  c.per_rank_tokens = budget_bytes_per_rank / c.bytes_per_token;
  c.instance_tokens = c.per_rank_tokens * topology.groups_per_instance;
  return c;
}

}  // namespace mlaserve::parallel
