/* planner/shapes.h — the plans a framework's configuration can express, and
 * the best of them under a budget (`offsim plan --framework NAME`, `--emit`).
 *
 * A framework's configuration does not take one action per layer: it takes
 * switches and counts.  Each target's shapes, read from its source (the
 * commits are in tests/data/frameworks/, the emitted names in cli/emit.c):
 *
 *   megatron    --recompute-granularity full --recompute-method block
 *               --recompute-num-layers N: the first N layers recompute; with
 *               --fine-grained-activation-offloading the others offload
 *               (its modules); --recompute-granularity selective: every
 *               layer selective, offloaded too with the offloading
 *   torchtune   enable_activation_checkpointing: every layer recomputes;
 *               enable_activation_offloading (which needs it) offloads the
 *               checkpointed inputs
 *   verl        enable_gradient_checkpointing (every layer), and
 *               enable_activation_offload: every layer offloads (with
 *               checkpointing, its input), the last layer kept
 *   te          get_cpu_offload_context(num_layers=N, model_layers=L): the
 *               first N layers offload, N < L
 *   deepspeed   activation_checkpointing: every layer the model checkpoints
 *               (all of them), its input offloaded with cpu_checkpointing
 *   torchtitan  [activation_checkpoint] mode = "full": every layer;
 *               "selective" with selective_ac_option = "k": layers k-1,
 *               2k-1, ... (every k-th, counted from 1)
 *
 * Each target's offloads run its own copy schedule (its SimFramework preset;
 * torchtitan offloads nothing).  The search evaluates every shape (about 2L
 * for Megatron and TE, a handful for the others) and keeps the least step
 * that fits; the unrestricted plan beside it is planner_plan_framework's
 * with the same schedule, so the difference is the restriction's cost.
 *
 * A pipeline's plan is per stage (planner/stages.h): not searched here.
 */
#pragma once

#include "planner/plan.h"

G_BEGIN_DECLS

/* The targets, one row each: X(ENUM suffix, name, the SIM_FRAMEWORK_ preset
 * whose copy schedule its offloads run: NONE, it offloads nothing).  The
 * order is the one --help and messages list them in.  A target's shapes
 * are its case in planner_shapes_list (planner/shapes.c); how it is
 * written, its emitter in cli/emit.c (NAME_emitter, which must exist). */
#define PLANNER_TARGET_MAP(X)          \
  X(MEGATRON, megatron, MEGATRON)      \
  X(TORCHTUNE, torchtune, TORCHTUNE)   \
  X(VERL, verl, VERL)                  \
  X(TE, te, TE)                        \
  X(DEEPSPEED, deepspeed, DEEPSPEED)   \
  X(TORCHTITAN, torchtitan, NONE)

#define PLANNER_TARGET_ENUM_(e, name, framework) PLANNER_TARGET_##e,
typedef enum {
  PLANNER_TARGET_MAP(PLANNER_TARGET_ENUM_)
  PLANNER_TARGET_COUNT,
} PlannerTarget;
#undef PLANNER_TARGET_ENUM_

/* The targets' names, indexed by PlannerTarget, NULL-terminated. */
extern const char *const planner_target_names[];

/* The name's target; FALSE if it is none. */
gboolean planner_target_lookup(const char *name, PlannerTarget *target);

/* The copy schedule its offloads run (SIM_FRAMEWORK_NONE: it offloads nothing). */
SimFramework planner_target_framework(PlannerTarget target);

/* One plan a configuration expresses: layer i takes `on` when i < first
 * (every = 0) or (i + 1) % every == 0 (every > 0), else `rest`; then the
 * last keep_last layers take their action without its offload. */
typedef struct {
  SimAction on, rest;
  guint first, every, keep_last;
} PlannerShape;

/* The shape's actions for `n` layers into `actions`. */
void planner_shape_actions(const PlannerShape *shape, guint n, SimAction *actions);

/* The target's shapes for `n` layers (selective ones only when `selective`:
 * the layers have tensors selective recompute drops), an array of
 * PlannerShape, the one without any action first. */
GArray *planner_shapes_list(PlannerTarget target, guint n, gboolean selective);

/* Whether `actions` (n of them) is one of the target's shapes: *shape. */
gboolean planner_shapes_match(PlannerTarget target, const SimAction *actions, guint n, PlannerShape *shape);

/* Runs of equal actions: "L0-L11 recompute, L12-L31 offload".  New string. */
char *planner_shapes_describe(const SimAction *actions, guint n);

typedef struct {
  PlannerPlan *plan;         /* the best shape's plan (feasible FALSE: none fits; the least peak's) */
  PlannerShape shape;
  PlannerPlan *unrestricted; /* planner_plan_framework, the target's schedule */
} PlannerShapesPlan;

void planner_shapes_plan_free(PlannerShapesPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlannerShapesPlan, planner_shapes_plan_free)

/* The fastest of the target's shapes whose reserved peak fits `budget`, and
 * the unrestricted plan.  A pipeline is SIM_ERROR_INPUT. */
PlannerShapesPlan *planner_shapes_plan(const SimScenario *scenario, guint64 budget, PlannerTarget target,
                                       GError **error);

G_END_DECLS
