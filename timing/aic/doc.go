// Package aic is the op-level timing model (--timing default): it prices a forward pass from
// per-kernel measurements in AIConfigurator's performance database (ai-dynamo/aiconfigurator,
// ../shared/docs/reference/peers.md §5), the way AIConfigurator composes a model from ops.
//
// Start with Options, New and Model.Cost (model.go). New resolves the engine version, loads the
// tables the configuration needs (db.go: layout, reuse.yaml, parquet reading, cached per process by
// path; tables.go: GEMM, attention, MoE and all-reduce tables) and precomputes everything that does
// not depend on the batch, once per process for the same Options (cache.go); Cost then only
// interpolates, allocation-free (≈0.5 µs for a 2048-token chunk beside 64 decodes). interp.go holds the interpolation rules, roofline.go the speed-of-light
// formulas used beyond the measured ranges.
//
// # The model
//
// One pass of one engine rank (tensor parallelism TP) with T new tokens costs, per layer, the QKV,
// O and MLP GEMMs at m = T (MoE layers: the bf16 router GEMM, the fused-MoE table at T tokens with
// moe_tp = TP, or with expert parallelism EP moe_tp = TP/EP and moe_ep = EP; shared experts as GEMMs), two memory-bound norms and the activation (AIConfigurator's
// ElementWise ops), two all-reduces of T·hidden bf16 elements when TP > 1; once per pass the
// embedding lookup and its all-reduce; context attention for each prompt chunk, generation attention
// for the decode requests, and the bf16 LM-head GEMM at m = number of sampling requests. All of it
// that depends only on T is tabulated at construction on the union of the tables' own grid points,
// so a pass costs one 1-D lookup for it. See Model.Cost for attention and for the split into
// Prefill and Decode.
//
// # The data
//
//	<Root>/<system>/<op>/<backend>/<version>/<table>.parquet
//
// with latency in ms per call of one op in one layer, as parquet files or as the compact gzip'd CSV
// tables (*.csv.gz) that Generate writes. Options.Root EmbeddedRoot reads the tables built into the
// binary (embedded/: H200, vLLM 0.24.0 and 0.18.0, SGLang 0.5.14, what the catalog's models read; see
// embedded/PROVENANCE.md); Discover chooses the root when no directory is given. The newest engine version that has every
// needed table (directly or through reuse.yaml) is used unless Options.Version names one. A
// missing system, version, dtype, head configuration, MoE shape or TP group is an error naming the
// file and the key; nothing is substituted silently. Six documented substitutions: 16-bit models use
// the bfloat16 rows (the tables have no float16; Hopper runs both at the same rate), with TP > 1
// an engine version without a custom all-reduce table uses NCCL's all_reduce table (of the system
// spec's misc.nccl_version), and vLLM int4_wo experts whose rows time the WNA16 kernels rather than
// the Marlin MoE vLLM runs (vllmWNA16Kernel: 0.18.0 to 0.22.0) are priced from the nearest version's
// Marlin rows (marlinMoE), and vLLM fp8_block GEMMs whose rows time the host rather than a kernel
// (hostBoundRatio: 0.18.0, 0.22.0, 0.24.0) are priced from the nearest version's kernel-bound rows
// (blockGEMMSource: 0.19.0, which the embedded tables carry for it), vLLM 0.12–0.14 fp8_block
// experts below MoE TP 8, which vLLM runs through DeepGEMM's contiguous grouped GEMM at every batch
// (deepGEMMMoE), are priced as those GEMMs over vLLM's worst-case row count from the nearest
// version's DeepGEMM GEMM rows (deepGEMMExperts: 0.24.0; not in the embedded tables, which hold no
// such version), and a context-attention table holding rows faster than the GPU's peak allows for
// their arithmetic (impossibleCtx: vLLM 0.19.0) is replaced by the nearest version's (ctxAttnSource).
//
// # Interpolation
//
// As AIConfigurator's perf_interp engine: measured points are returned exactly; between them GEMM
// latency is interpolated linearly in m (the physics is near-linear in m, and the dense m sweep is
// where wave-quantisation saw-teeth live, which a log-space blend would smear), context attention
// in sqrt(latency) along the sequence (latency ~ s²), everything else linearly; GEMM shapes that
// were not measured transfer the utilisation (roofline / latency) of the surrounding (n, k) sites,
// bilinearly in log n and log k; beyond the measured ranges the boundary utilisation is held and
// the roofline (tensor-core peak of the dtype, HBM bandwidth, NVLink for all-reduce) scales the
// latency.
//
// # Multi-head latent attention
//
// MLA models (DeepSeek-V3/R1) are priced on SGLang's op tables as AIConfigurator's DeepSeekModel
// composes them (sdk/models/deepseek.py, the granular MLA block): per layer the fused q_a/kv_a
// down-projection (replicated), q_b_proj and o_proj GEMMs for every token, kv_b_proj for prefill
// tokens, context_mla_perf for prompt chunks, and for decode tokens mla_bmm_perf's two absorbed
// BMMs (fp8 when the GEMMs are quantised) around generation_mla_perf; attention is read at
// heads/TP in the tables' family of the model's head count (num_heads × tp_size). Their MoE is
// priced as DeepSeekModel prices it (deepSeekFamily): the power_law_1.01 expert distribution, and
// in decode passes the shared expert overlapped with the routed group (the larger of the two).
// On vLLM the MLA tables are whole DeepseekV2MLAAttention modules (mla_context_module_perf,
// mla_generation_module_perf: projections, attention and o_proj in one forward); they replace the
// projections and the attention (loadMLAModule), a chunk over a cached prefix scaled by its share of
// the causal token pairs as AIConfigurator does (moduleChunk).
//
// # Linear attention
//
// Gated DeltaNet layers (Qwen3.5's linear_attention layers, model.Model.LinearLayers) are priced as
// AIConfigurator's Qwen35Model composes them (sdk/models/qwen35.py): the fused input projection and
// the output projection as GEMMs, and the gdn_perf kernels at the heads one GPU holds — a prompt
// chunk's causal convolution and chunked delta rule by (chunks, length), a decode step's
// convolution update and recurrence by batch (loadGDN, Model.Cost's linearContext and
// linearGeneration). The recurrence carries a cached prefix in its state, so only new tokens cost.
//
// # Sparse attention
//
// DeepSeek sparse attention (GLM-5; model.Model.DSA) on SGLang is priced as AIConfigurator's
// DeepSeekV32Model composes it (sdk/models/deepseek_v32.py): the whole attention block — the
// projections, the indexer and the sparse MLA kernel over each query's top index_topk keys — is one
// lookup of sparse_attention/sglang/<version>/dsa_{context,generation}_module_perf, at the rows of
// the model's architecture (matched by geometry), projection precision and KV cache dtype, and of
// the kernels the system's sub-backend runs (FlashMLA on Hopper, TensorRT-LLM's on Blackwell with
// an fp8 KV cache); the rest of the layer stays per op (loadDSAModule). On vLLM GLM-5 is not priced.
//
// # Expert and attention data parallelism
//
// Expert parallelism (Options.EP) changes the experts' table rows; without attention data
// parallelism the dispatch and combine stay the layer's two TP all-reduces (AIConfigurator's
// MoEDispatch for vLLM and SGLang without DeepEP). With attention data parallelism
// (Options.AttentionDP) the experts span TP × AttentionDP GPUs, and a rank's pass prices its own
// tokens' work as before but the fused MoE at the group's tokens (timing.Batch.Group; see
// groupTokens) and, per MoE layer, an NCCL all_gather and reduce_scatter of them over all the
// group's GPUs (AIConfigurator's MoE op at num_tokens × attention_dp_size and its MoEDispatch).
// DeepEP, the dense layers of the DeepSeek family running over the whole group, and the TP
// all-reduces AIConfigurator prices over all the group's GPUs for vLLM are not modelled: a rank's
// all-reduces stay its TP group's.
//
// # Not covered
//
// Pipeline parallelism is not modelled. A speculative decode step (MTP: a decode's New is 1 + its drafts) is
// priced as AIConfigurator prices nextn: every generation op at the step's tokens, the drafts
// counting as requests of their own, and the step × (layers + drafts) / layers for the draft
// module; acceptance is the scheduler's. AIConfigurator's end-to-end corrections (vLLM's
// per-request "prefill dispatch overhead" of 0.8 ms × layers on TTFT, queueing and mixed-step
// factors) are not pass costs and are left out.
package aic
