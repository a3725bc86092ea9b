/* gpu_calib/calib_shapes.h — the GEMM shapes offsim-calib times for the
 * kernel cost model: a transformer layer's projections and its LM head,
 * forward and backward, derived from a model's dimensions
 * (--gemm-model), or given as MxNxK (--gemm-shapes).
 *
 * A shape is C (m x n) = op(A) (m x k) . op(B) (k x n), 2 m n k FLOPs, as
 * the kernel cost model (sim/engine/kernel.h) and the profile's gemm_table
 * key it.  A linear layer y = x W^T, W of out x in, over `tokens` = batch x
 * sequence rows runs three GEMMs:
 *
 *   forward  Y  = X W^T     m = tokens, n = out, k = in
 *   dgrad    dX = dY W      m = tokens, n = in,  k = out
 *   wgrad    dW = dY^T X    m = out,    n = in,  k = tokens
 *
 * and each is timed in its own operand layout (row-major, as PyTorch lays
 * out activations and weights: forward NT, dgrad NN, wgrad TN).  The
 * linears of a layer: q (hidden -> heads x head_dim), k and v (hidden ->
 * kv_heads x head_dim), o (heads x head_dim -> hidden), SwiGLU's gate and
 * up (hidden -> ffn) and down (ffn -> hidden); then the LM head (hidden ->
 * vocab).  A list holds each m x n x k once: the first GEMM that has it
 * (all forwards, then all dgrads, then all wgrads, in that order of
 * linears) names it and gives its layout, and `uses` counts the GEMMs that
 * share it, over every model added.
 *
 * Plain C, no CUDA: the tests run it on CPU.  Parse errors are
 * SIM_ERROR_INPUT with a message that quotes the text and says what was
 * expected; the caller adds the option's name.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Each dimension of a shape or a model is at most this (cuBLAS takes int). */
#define CALIB_SHAPE_MAX_DIM (1 << 20)
/* Each operand of a shape holds at most this many elements (8 GiB in fp32). */
#define CALIB_SHAPE_MAX_ELEMENTS (G_GUINT64_CONSTANT(1) << 31)

typedef enum { CALIB_GEMM_FORWARD, CALIB_GEMM_DGRAD, CALIB_GEMM_WGRAD, CALIB_GEMM_PASSES } CalibGemmPass;

/* "fwd", "dgrad", "wgrad", indexed by CalibGemmPass. */
extern const char *const calib_gemm_pass_names[CALIB_GEMM_PASSES];

typedef struct {
  int m, n, k;
  char name[48];      /* "llama3.1-8b q.fwd", or "qkv" */
  CalibGemmPass pass; /* the operands' layout */
  int uses;           /* GEMMs of the added models with this m x n x k; 1 for an explicit shape */
} CalibGemmShape;

typedef struct {
  char name[24]; /* "llama3.1-8b", or "model" when the text gives none */
  guint64 hidden, ffn, heads, kv_heads, head_dim, vocab, tokens;
} CalibModelDims;

/* "[NAME=]HIDDEN,FFN,HEADS,KV_HEADS,HEAD_DIM,VOCAB,TOKENS": seven whole
 * numbers in [1, CALIB_SHAPE_MAX_DIM], kv_heads at most heads; NAME is
 * letters, digits, '.', '_' and '-', at most 23. */
gboolean calib_shapes_parse_model(const char *text, CalibModelDims *dims, GError **error);

/* Appends the layer's and the LM head's GEMMs of `dims` to `shapes` (a
 * GArray of CalibGemmShape), each m x n x k once; FALSE, and `shapes`
 * unchanged, when an operand would exceed CALIB_SHAPE_MAX_ELEMENTS. */
gboolean calib_shapes_add_model(GArray *shapes, const CalibModelDims *dims, GError **error);

/* Appends "MxNxK, MxNxK, ..." (forward layout, named by the shape) to
 * `shapes`, each m x n x k once; FALSE, and `shapes` unchanged, on the
 * first bad item. */
gboolean calib_shapes_parse_list(GArray *shapes, const char *text, GError **error);

/* 2 m n k. */
double calib_gemm_flops(int m, int n, int k);
/* TFLOP/s of one m x n x k GEMM that took `seconds`. */
double calib_gemm_tflops(int m, int n, int k, double seconds);

G_END_DECLS
