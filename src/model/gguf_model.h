/* gguf_model.h — a GGUF file as a model checkpoint: its metadata as a target / drafter config
 * and its tensors under the Hugging Face names the loaders ask for.
 *
 * Architectures (general.architecture) and the keys / tensor names llama.cpp's converter
 * writes for them ({a} = the architecture, N = layer):
 *   targets `qwen3`, `llama`: {a}.embedding_length (H), .feed_forward_length (I), .block_count
 *     (L), .attention.head_count, .attention.head_count_kv, .attention.key_length (hd, default
 *     H / heads), .attention.layer_norm_rms_epsilon, .rope.freq_base (default 10000),
 *     .context_length; tokenizer.ggml.eos_token_id / eot_token_id / eom_token_id (the EOS set).
 *     token_embd -> model.embed_tokens, output_norm -> model.norm, output -> lm_head (absent:
 *     tied), blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm,
 *     ffn_norm, ffn_gate, ffn_up, ffn_down} -> model.layers.N.{input_layernorm, self_attn.q_proj,
 *     ..., post_attention_layernorm, mlp.gate_proj, ...}. A `llama` file stores attn_q / attn_k
 *     rows permuted for interleaved RoPE (per head, row 2i + j holds Hugging Face row
 *     j * hd/2 + i); they are permuted back on load, rows being whole quantized rows.
 *   drafters `dflash`: the same layer keys and names without "model.", plus {a}.target_layers
 *     (1-based layer outputs: tap = value - 1), .block_size, tokenizer.ggml.mask_token_id,
 *     .logit_scale (output multiplier), .final_logit_softcapping, .attention.causal,
 *     .attention.sliding_window + .attention.sliding_window_pattern (bool per layer), and for
 *     DFlash 2 .conv_kernel_size, .conv_group_size, .selector_rank, .selector_top_k;
 *     fc -> fc, enc.output_norm -> hidden_norm, output_norm -> norm, blk.N.attn_conv_base /
 *     attn_conv_proj / ffn_conv_base / ffn_conv_proj -> layers.N.attention_conv.base_kernel /
 *     .kernel_projection / mlp_conv..., selector_hidden / selector_predecessor /
 *     selector_successor -> candidate_selector.hidden_projection / predecessor_codebook /
 *     successor_codebook. Vocabulary: {a}.vocab_size, else the tokenizer's token count, else
 *     the embedding / codebook rows.
 * Shapes are reversed from GGUF's ne order (ne[0] innermost) to row-major [rows, cols]. */
#ifndef DB_GGUF_MODEL_H
#define DB_GGUF_MODEL_H

#include "model/gguf.h"
#include "model/model_config.h"
#include "model/safetensors.h"

int db_gguf_model_config(db_model_config *m, const char *path, char *err, size_t errlen);
int db_gguf_drafter_config(db_drafter_config *d, const char *path, int target_layers, char *err,
                           size_t errlen);
/* the file's tensors as a checkpoint set (the set owns the mapping) */
int db_gguf_open_tensors(db_tensor_set *s, const char *path, char *err, size_t errlen);
/* the file's tokenizer.ggml.* metadata as an equivalent tokenizer.json object (caller deletes;
 * gguf_tokenizer.c says how the fields map) */
struct cJSON;
int db_gguf_tokenizer_json(const char *path, struct cJSON **out, char *err, size_t errlen);

#endif
