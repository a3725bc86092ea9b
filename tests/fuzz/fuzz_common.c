#define _GNU_SOURCE /* RTLD_NEXT */
#include "fuzz_common.h"

#include "base/error.h"
#include "result/evaluate.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FUZZ_LSAN)
#define FUZZ_LSAN 1
#endif

#ifdef FUZZ_LSAN
#include <dlfcn.h>
#include <sanitizer/lsan_interface.h>

/* GLib's interned strings are not leaks, but LeakSanitizer sees one: tensor
 * names are interned (sim/model/workload.c), and g_intern_string keeps its
 * strings in an array that it grows, every 2,048 new strings, by copying it
 * into a larger one and dropping the old one on purpose (gquark.c: the old
 * array is leaked so that lookups need no lock).  A fuzz run sees
 * thousands of names, so fuzz_trace reported the first array (16 KiB,
 * "direct leak"; tests/fuzz/corpus/trace/interned-names-2100.csv).  Its
 * stack cannot be suppressed by name: GLib has no frame pointers, so the
 * fast unwinder stops at g_malloc.  So, in the fuzz targets and in
 * test_hostile under the sanitizers, leak tracking is off for exactly what
 * GLib keeps on purpose: what the shared libraries allocate while they
 * initialise, before main (GLib makes the first array then), and each call
 * of g_intern_string, which takes GLib's place here.  Every other
 * allocation is still checked. */
static void
lsan_off_before_libraries(void)
{
  __lsan_disable();
}
__attribute__((section(".preinit_array"), used)) static void (*const lsan_off)(void) = lsan_off_before_libraries;

/* Executables' constructors run after every shared library's. */
__attribute__((constructor)) static void
lsan_on_in_main(void)
{
  __lsan_enable();
}

const gchar *
g_intern_string(const gchar *string)
{
  typedef const gchar *(*InternFunc)(const gchar *);
  static InternFunc glib_intern;
  if (glib_intern == NULL) {
    void *symbol = dlsym(RTLD_NEXT, "g_intern_string");
    if (symbol == NULL)
      abort();
    memcpy(&glib_intern, &symbol, sizeof glib_intern); /* ISO C has no object-to-function cast */
  }
  __lsan_disable();
  const gchar *interned = glib_intern(string);
  __lsan_enable();
  return interned;
}
#endif

static char *temp_dir;

static void
remove_temp_dir(void)
{
  g_rmdir(temp_dir);
}

const char *
fuzz_temp_dir(void)
{
  if (temp_dir == NULL) {
    temp_dir = g_dir_make_tmp("offsim-fuzz-XXXXXX", NULL);
    if (temp_dir == NULL)
      abort();
    atexit(remove_temp_dir);
  }
  return temp_dir;
}

void
fuzz_expect_input_error(const GError *error, const char *what)
{
  if (error == NULL || g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT))
    return;
  fprintf(stderr, "fuzz: %s failed with more than bad input: %s\n", what, error->message);
  abort();
}

SimScenario *
fuzz_scenario_new(SimWorkload *workload)
{
  SimScenario *s = g_new0(SimScenario, 1);
  s->name = g_strdup("fuzz");
  s->origin = g_strdup("fuzz");
  sim_scenario_machine_defaults(&s->machine);
  sim_scenario_parallel_defaults(&s->parallel);
  s->machine.device.memory = 80ull << 30;
  s->machine.device.matmul_flops = 790e12;
  s->machine.device.hbm_bandwidth = 3.35e12;
  s->machine.link.h2d_bandwidth = s->machine.link.d2h_bandwidth = 55e9;
  s->machine.link.bidir_bandwidth = 100e9;
  s->machine.link.latency = 8e-6;
  s->machine.link.compute_slowdown = 0.03;
  s->workload = workload;
  s->policies = sim_scenario_default_policies();
  return s;
}

/* Ops a lowering can emit, roughly: a few per layer and per saved reference. */
static guint64
work_of(const SimWorkload *w)
{
  guint64 work = 0;
  for (guint i = 0; i < sim_workload_n_layers(w); i++) {
    const SimLayer *layer = sim_workload_layer(w, i);
    work += 8;
    for (guint k = 0; k < layer->tensors->len; k++)
      work += 2 + 2 * (guint64)MAX(g_array_index(layer->tensors, SimTensor, k).refs, 1u);
  }
  return work;
}

static GPtrArray *
extra_policies(guint n_layers)
{
  GPtrArray *set = g_ptr_array_new_with_free_func((GDestroyNotify)sim_policy_free);
  SimPolicy *selective = sim_policy_new("fuzz-selective", SIM_POLICY_CHECKPOINT);
  selective->selective = TRUE;
  selective->every = 2;
  g_ptr_array_add(set, selective);

  SimPolicy *pinned = sim_policy_new("fuzz-offload-pinned", SIM_POLICY_OFFLOAD);
  pinned->pinned = SIM_PINNED_PER_TENSOR;
  pinned->prefetch = 0;
  pinned->inflight = 1;
  pinned->keep_last = 0;
  pinned->min_tensor = 1 << 20;
  g_ptr_array_add(set, pinned);

  for (int async = 0; async < 2; async++) {
    SimPolicy *plan = sim_policy_new(async ? "fuzz-plan-async" : "fuzz-plan-sync", SIM_POLICY_PLAN);
    plan->async = async;
    plan->dedup = async;
    plan->prefetch = async ? 3 : 0;
    plan->pinned = async ? SIM_PINNED_POOLED : SIM_PINNED_PAGEABLE;
    plan->actions = g_array_sized_new(FALSE, FALSE, sizeof(SimAction), n_layers);
    for (guint i = 0; i < n_layers; i++) {
      SimAction a = (SimAction)((async ? i : n_layers - 1 - i) % SIM_ACTION_COUNT);
      g_array_append_val(plan->actions, a);
    }
    g_ptr_array_add(set, plan);
  }
  return set;
}

static void
evaluate(const SimScenario *s, const SimPolicy *p, SimEvaluator *evaluator)
{
  g_autoptr(GError) error = NULL;
  SimEvaluateOptions options = { .detail = TRUE };
  g_autoptr(SimResult) r = sim_evaluate(evaluator, s, p, &options, &error);
  if (r == NULL) {
    fprintf(stderr, "fuzz: policy '%s' failed: %s\n", p->name, error ? error->message : "(no message)");
    abort();
  }
  /* What the reports and plots read, so that they run on hostile results too. */
  g_autofree char *live = sim_result_describe_live(r->run, r->program, SIM_POOL_DEVICE);
  g_autofree char *host = sim_result_describe_live(r->run, r->program, SIM_POOL_HOST);
  if (!(r->step_ms >= 0) || r->peak_device.bytes < 0 || r->peak_host.bytes < 0 || live == NULL || host == NULL) {
    fprintf(stderr, "fuzz: policy '%s': step %g ms, peaks %" G_GINT64_FORMAT " / %" G_GINT64_FORMAT "\n", p->name,
            r->step_ms, r->peak_device.bytes, r->peak_host.bytes);
    abort();
  }
}

void
fuzz_evaluate_all(const SimScenario *s)
{
  if (work_of(s->workload) > FUZZ_MAX_WORK)
    return;
  g_autoptr(SimEvaluator) evaluator = sim_evaluate_new();
  for (guint i = 0; i < s->policies->len; i++)
    evaluate(s, g_ptr_array_index(s->policies, i), evaluator);
  g_autoptr(GPtrArray) extra = extra_policies(sim_workload_n_layers(s->workload));
  for (guint i = 0; i < extra->len; i++)
    evaluate(s, g_ptr_array_index(extra, i), evaluator);
}
