// Package model describes the transformer architectures mocker simulates: a built-in catalog of public
// models, a reader for Hugging Face config.json files, and the sizes the rest of mocker derives from them —
// parameter counts, weight bytes per GPU under tensor parallelism, and KV-cache bytes per token.
//
// Start with Model and Lookup (catalog.go). FromHFConfig (hf.go) builds the same Model from a checkpoint's
// config.json, so a model missing from the catalog is one file away. Sizes are in size.go.
//
// Every catalog number is the one in the model's public config.json; each entry names its Hugging Face id.
// Sizes count the weights the serving engines load (vLLM's layout): embeddings, attention, MLP or experts,
// norms, and the LM head unless it is tied to the embeddings. Multi-token-prediction heads (DeepSeek's
// num_nextn_predict_layers) and vision towers are not counted.
//
// Tensor parallelism follows vLLM: embeddings, LM head, attention heads, MLPs and experts are split tp
// ways; norms and routers are replicated; when a model has fewer KV heads than GPUs each GPU keeps one;
// DeepSeek's MLA down-projections and its latent KV cache are replicated on every GPU.
package model
