package aic

import (
	"fmt"
	"strings"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
)

// DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5) on SGLang is priced as AIConfigurator's
// DeepSeekV32Model prices it (ai-dynamo/aiconfigurator src/aiconfigurator/sdk/models/deepseek_v32.py):
// a layer's whole attention block is one module-table lookup, ContextDSAModule in prefill and
// GenerationDSAModule in decode (sdk/operations/dsa.py). The module covers the fused q_a/kv_a(+indexer
// key) down-projection, q_b_proj, the indexer (its q and weight projections, fp8 MQA logits, top-k),
// the sparse MLA kernel over the selected keys, the absorbed kv_b BMMs and o_proj; what stays per op
// is the rest of the layer: the norms, the shared expert, the router GEMM, the MoE and its two
// dispatches (SGLang's TP all-reduces), the embedding and the LM head (buildCurves with dsa set).
var (
	dsaCtxTable = tableRef{op: "sparse_attention", table: "dsa_context_module_perf"}
	dsaGenTable = tableRef{op: "sparse_attention", table: "dsa_generation_module_perf"}
)

// dsaOpName is the op_name of the rows that compute the indexer in every layer. GLM-5.2's layers
// that reuse another layer's top-k are filed as <op_name>_skip_indexer; DeepSeek-V3.2 and GLM-5
// run the indexer in every layer (AIConfigurator's full-layer fraction 1).
var dsaOpName = map[bool]string{false: "dsa_context_module", true: "dsa_generation_module"}

// dsaGeometry is what a DSA architecture's attention block computes; the tables are keyed by
// architecture name, each measured at its geometry (AIConfigurator's DSA_MODEL_DIMS).
type dsaGeometry struct {
	hidden, qLoRA, kvLoRA, nope, rope, v int
	indexHeads, indexHeadDim, indexTopK  int
}

var dsaArchitectures = map[string]dsaGeometry{
	"DeepseekV32ForCausalLM": {7168, 1536, 512, 128, 64, 128, 64, 128, 2048},
	"GlmMoeDsaForCausalLM":   {6144, 2048, 512, 192, 64, 256, 32, 128, 2048},
}

// dsaArchitecture names the architecture whose module tables price m: the one with m's geometry.
func dsaArchitecture(m *model.Model) (string, error) {
	g := dsaGeometry{m.Hidden, m.QLoRARank, m.KVLoRARank, m.QKNopeHeadDim, m.QKRopeHeadDim, m.VHeadDim,
		m.IndexHeads, m.IndexHeadDim, m.IndexTopK}
	for name, a := range dsaArchitectures {
		if a == g {
			return name, nil
		}
	}
	return "", fmt.Errorf("aic: model %s: no DSA module table measured its attention (hidden %d, q_lora %d, kv_lora %d, nope %d, rope %d, v %d, indexer %d×%d top %d); measured: DeepSeek-V3.2's and GLM-5's",
		m.Name, g.hidden, g.qLoRA, g.kvLoRA, g.nope, g.rope, g.v, g.indexHeads, g.indexHeadDim, g.indexTopK)
}

// dsaSubBackend is the kernel family SGLang's DSA backend runs with an fp8 KV cache: FlashMLA's
// (flashmla_kv) on Hopper, TensorRT-LLM's on Blackwell and later (AIConfigurator's
// _dsa_kernel_source_buckets: "SM90 -> flashmla_kv, SM100+ -> trtllm"). Blackwell is told by its
// FP4 tensor cores, which Hopper lacks.
func dsaSubBackend(sys *hardware.System) string {
	if sys.FLOPS["fp4"] > 0 {
		return "trtllm"
	}
	return "flashmla_kv"
}

// dsaRowRuns reports whether a row timed the kernels SGLang runs under sub-backend sub, as
// AIConfigurator buckets the rows (operations/dsa.py, _dsa_kernel_source_buckets): with a bf16 KV
// cache there is one execution path per shape, so every row counts; with fp8 the rows of the other
// sub-backend's kernels do not, except TensorRT-LLM's dense ragged prefill, which SGLang picks by
// shape (up to index_topk tokens) under either. Pre-0.5.14 names (dsa_nsa) and the dense FA3
// prefill hold no "trtllm" and so are FlashMLA's.
func dsaRowRuns(kernel, kvDtype, sub string) bool {
	if kvDtype == "bfloat16" || kernel == "sglang_dsa_dense_mha_trtllm_ragged" {
		return true
	}
	if strings.Contains(kernel, "trtllm") {
		return sub == "trtllm"
	}
	return sub == "flashmla_kv"
}

// loadDSA reads a dsa_context_module_perf (gen false) or dsa_generation_module_perf table: the rows
// of architecture arch, projections in gemm (gemm_type) and kernels of sub-backend sub, filed as
// attnKey{num_heads, 1, mlaLatent, 0, mla_dtype, kv_cache_dtype} (num_heads is the heads per GPU)
// by (batch, isl) at prefix (step) 0 for context and, for generation, by (batch, s − 1): AIConfigurator
// keys a generation row by s = isl + step and looks it up at the sequence's length with the new
// token, so a decode over c cached tokens reads s = c + 1.
func loadDSA(paths []string, gen bool, arch, gemm, sub string) (attnRows, error) {
	have := map[string]bool{}
	rows, err := loadMLARows(paths, gen, true, func(t *table) (func(int) bool, error) {
		kd, e1 := t.s("kv_cache_dtype")
		ar, e2 := t.s("architecture")
		gt, e3 := t.s("gemm_type")
		op, e4 := t.s("op_name")
		ks, e5 := t.s("kernel_source")
		if err := firstErr(e1, e2, e3, e4, e5); err != nil {
			return nil, err
		}
		return func(i int) bool {
			if ar[i] != arch || op[i] != dsaOpName[gen] {
				return false
			}
			have[gt[i]] = true
			return gt[i] == gemm && dsaRowRuns(ks[i], kd[i], sub)
		}, nil
	})
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("aic: %s: no %s rows of %s with gemm_type %s (have %s)", sourceList(paths), dsaOpName[gen], arch, gemm, keys(have))
	}
	return rows, err
}

// loadDSAModule builds the attention of a DSA model from SGLang's DSA module tables (see dsaCtxTable):
// the context module by (batch, isl), a chunk over a cached prefix priced as AIConfigurator prices
// the MLA module's (moduleChunk), the generation module by (batch, sequence length). The tables
// measured the projections in bfloat16 and fp8_block only, the formats the DSA checkpoints ship
// (DeepSeek-V3.2 and GLM-5-FP8: fp8 in 128×128 blocks); fp8 projections are read from the
// fp8_block rows, the same fp8 tensor-core rate.
func (mdl *Model) loadDSAModule(c *config, rf *roofline, ctxSrc, genSrc []string) error {
	gemm := c.gemmDtype
	if gemm == "fp8" {
		gemm = "fp8_block"
	}
	sub := dsaSubBackend(c.System)
	ctxRows, err := loadDSA(ctxSrc, false, c.dsa, gemm, sub)
	if err != nil {
		return err
	}
	genRows, err := loadDSA(genSrc, true, c.dsa, gemm, sub)
	if err != nil {
		return err
	}
	mdl.dsa = true
	return mdl.addMLAAttn(c, rf, ctxRows, genRows, ctxSrc, genSrc, true)
}
