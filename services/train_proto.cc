#include "services/train_proto.h"

#include "services/proto_conv.h"

namespace tpuemu {
namespace {

v1::Parallelism ToProto(const Parallelism& p) {
  v1::Parallelism m;
  m.set_data(p.data);
  m.set_fsdp(p.fsdp);
  m.set_tensor(p.tensor);
  m.set_pipeline(p.pipeline);
  return m;
}

Parallelism FromProto(const v1::Parallelism& m) { return {m.data(), m.fsdp(), m.tensor(), m.pipeline()}; }

}  // namespace

v1::TrainConfig ToProto(const TrainConfig& c) {
  v1::TrainConfig m;
  m.set_name(c.name);
  m.set_topology(c.topology);
  m.set_num_slices(c.num_slices);
  *m.mutable_ici() = ToProto(c.ici);
  *m.mutable_dcn() = ToProto(c.dcn);
  m.set_emb_dim(c.emb_dim);
  m.set_mlp_dim(c.mlp_dim);
  m.set_num_layers(c.num_layers);
  m.set_global_batch_tokens(c.global_batch_tokens);
  m.set_steps(c.steps);
  m.set_seed(c.seed);
  m.set_opt_type(c.opt_type);
  m.set_learning_rate(c.learning_rate);
  m.set_adam_b1(c.adam_b1);
  m.set_adam_b2(c.adam_b2);
  m.set_adam_eps(c.adam_eps);
  m.set_activation(c.activation);
  m.set_dtype_bytes(c.dtype_bytes);
  m.set_wire_dtype_bytes(c.wire_dtype_bytes);
  m.set_time_scale(c.time_scale);
  m.set_fsdp_prefetch(c.fsdp_prefetch);
  m.set_hbm_bytes(c.hbm_bytes);
  m.set_num_microbatches(c.num_microbatches);
  m.set_pipeline_repeats(c.pipeline_repeats);
  m.set_pipeline_schedule(c.pipeline_schedule);
  m.set_pipeline_fsdp_ag_once(c.pipeline_fsdp_ag_once);
  m.set_checkpoint_every(c.checkpoint_every);
  m.set_max_restarts(c.max_restarts);
  m.set_num_chips(c.num_chips);
  m.set_values(c.values);
  m.set_gated_mlp(c.gated_mlp);
  m.set_remat_policy(c.remat_policy);
  m.set_num_query_heads(c.num_query_heads);
  m.set_num_kv_heads(c.num_kv_heads);
  m.set_head_dim(c.head_dim);
  m.set_seq_len(c.seq_len);
  m.set_vocab_size(c.vocab_size);
  if (!c.faults.empty() || c.faults.route_around) *m.mutable_faults() = ToProto(c.faults);
  return m;
}

TrainConfig FromProto(const v1::TrainConfig& m) {
  TrainConfig c;
  c.name = m.name();
  c.topology = m.topology();
  c.num_slices = m.num_slices();
  c.ici = FromProto(m.ici());
  c.dcn = FromProto(m.dcn());
  c.emb_dim = m.emb_dim();
  c.mlp_dim = m.mlp_dim();
  c.num_layers = m.num_layers();
  c.global_batch_tokens = m.global_batch_tokens();
  c.steps = m.steps();
  c.seed = m.seed();
  c.opt_type = m.opt_type();
  c.learning_rate = m.learning_rate();
  c.adam_b1 = m.adam_b1();
  c.adam_b2 = m.adam_b2();
  c.adam_eps = m.adam_eps();
  c.activation = m.activation();
  c.dtype_bytes = m.dtype_bytes();
  c.wire_dtype_bytes = m.wire_dtype_bytes();
  c.time_scale = m.time_scale();
  c.fsdp_prefetch = m.fsdp_prefetch();
  c.hbm_bytes = m.hbm_bytes();
  c.num_microbatches = m.num_microbatches();
  c.pipeline_repeats = m.pipeline_repeats();
  c.pipeline_schedule = m.pipeline_schedule();
  c.pipeline_fsdp_ag_once = m.pipeline_fsdp_ag_once();
  c.checkpoint_every = m.checkpoint_every();
  c.max_restarts = m.max_restarts();
  c.num_chips = m.num_chips();
  c.values = m.values();
  c.gated_mlp = m.gated_mlp();
  c.remat_policy = m.remat_policy();
  c.num_query_heads = m.num_query_heads();
  c.num_kv_heads = m.num_kv_heads();
  c.head_dim = m.head_dim();
  c.seq_len = m.seq_len();
  c.vocab_size = m.vocab_size();
  // An axis that is no axis: refused by SpecOf (services/job_proto.cc) first.
  c.faults = FromProto(m.faults()).value_or(Faults{});
  return c;
}

v1::TrainSpec ToProto(const TrainSpec& spec) {
  v1::TrainSpec m;
  *m.mutable_config() = ToProto(spec.config);
  m.set_source(spec.source);
  m.set_resume_step(spec.resume_step);
  return m;
}

TrainSpec FromProto(const v1::TrainSpec& m) { return {FromProto(m.config()), m.source(), m.resume_step()}; }

}  // namespace tpuemu
