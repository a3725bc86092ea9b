/* sim/input/internal/kineto_private.h — what the Kineto reader (kineto.c)
 * hands the kernel attribution (kineto_attribute.c); not for other modules.
 *
 * kineto.c reads each event once, summing what needs no other event and
 * keeping the records below; kineto_attribute.c then finds, for each CPU
 * span that matters (a GEMM op, a layer's forward range, a backward op),
 * the kernels launched inside it: a cuda_runtime launch on the span's
 * thread within its time, whose "correlation" is the kernel's.
 */
#pragma once

#include "input/kineto.h"

G_BEGIN_DECLS

typedef struct {
  gint64 thread;     /* pid and tid, folded */
  double start, end; /* microseconds */
} SimKinetoSpan;

typedef struct {
  SimKinetoSpan span;
  gint64 correlation;
} SimKinetoLaunch;

typedef struct {
  SimKinetoSpan span;
  char dtype[8];
  guint64 m, n, k, batch;
} SimKinetoGemmOp;

/* A CPU op with an autograd "Sequence number": a forward op, or (backward
 * TRUE) an "autograd::engine::evaluate_function: ..." op running its
 * backward node. */
typedef struct {
  SimKinetoSpan span;
  gint64 sequence;
  gboolean backward;
} SimKinetoSequenceOp;

typedef struct {
  SimKinetoSpan span;
  char *module; /* CLASS of "nn.Module: CLASS_N" */
  guint index;  /* N */
} SimKinetoModule;

typedef struct {
  GHashTable *kernel_seconds; /* correlation (gint64*) -> summed duration, seconds (double*) */
  GArray *launches;           /* SimKinetoLaunch */
  GArray *gemm_ops;           /* SimKinetoGemmOp */
  GArray *sequence_ops;       /* SimKinetoSequenceOp */
  GArray *modules;            /* SimKinetoModule */
} SimKinetoEvents;

/* Fills k->gemms and k->layers (and layer_class) from the records. */
void sim_kineto_attribute(SimKineto *k, SimKinetoEvents *events);

G_END_DECLS
