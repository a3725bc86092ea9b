/* sim/input/kineto_profile.c — a device profile from a Kineto trace (sim/input/kineto_profile.h). */
#include "input/kineto_profile.h"

#include "engine/machine.h"

#include <math.h>

/* A positive rate as a plain decimal with 6 significant digits: the
 * profile's parsers take no exponent ("650TFLOPS", "0.000123TFLOPS"). */
static void
append_plain(GString *out, double value)
{
  int digits = CLAMP(5 - (int)floor(log10(value)), 0, 30);
  char format[8], buffer[G_ASCII_DTOSTR_BUF_SIZE + 64];
  g_snprintf(format, sizeof format, "%%.%df", digits);
  g_string_append(out, g_ascii_formatd(buffer, sizeof buffer, format, value));
}

static gint
gemm_by_time(gconstpointer a, gconstpointer b)
{
  const SimKinetoGemm *x = *(const SimKinetoGemm *const *)a, *y = *(const SimKinetoGemm *const *)b;
  return (x->seconds < y->seconds) - (x->seconds > y->seconds);
}

static gint
gemm_by_shape(gconstpointer a, gconstpointer b)
{
  const SimKinetoGemm *x = *(const SimKinetoGemm *const *)a, *y = *(const SimKinetoGemm *const *)b;
  int c = g_strcmp0(x->dtype, y->dtype);
  if (c)
    return c;
  if (x->m != y->m)
    return x->m < y->m ? -1 : 1;
  if (x->n != y->n)
    return x->n < y->n ? -1 : 1;
  return (x->k > y->k) - (x->k < y->k);
}

/* [device]'s GEMM keys: gemm_table and each dtype's best rate. */
static void
format_gemms(GString *out, GString *missing, const SimKineto *k)
{
  g_autoptr(GPtrArray) timed = g_ptr_array_new();
  guint ops = 0, kernels = 0;
  for (guint i = 0; i < k->gemms->len; i++) {
    SimKinetoGemm *g = &g_array_index(k->gemms, SimKinetoGemm, i);
    if (g->seconds > 0 && g->flops > 0) {
      g_ptr_array_add(timed, g);
      ops += g->ops;
      kernels += g->kernels;
    }
  }
  if (timed->len == 0) {
    g_string_append_printf(missing, "#   gemm_table, matmul_tflops_*: %s\n",
                           k->gemm_ops_without_shapes
                             ? "the GEMM ops have no recorded shapes (torch.profiler record_shapes=True records them)"
                             : "no aten::mm, addmm, bmm or baddbmm op with kernels launched inside it");
    return;
  }
  g_ptr_array_sort(timed, gemm_by_time);
  gboolean cut = timed->len > SIM_DEVICE_MAX_GEMM_POINTS;
  if (cut)
    g_ptr_array_set_size(timed, SIM_DEVICE_MAX_GEMM_POINTS);
  g_ptr_array_sort(timed, gemm_by_shape);
  g_string_append_printf(out,
                         "# %u aten::mm/addmm/bmm/baddbmm ops with recorded shapes, %u kernels launched inside them: "
                         "2*m*n*k*batch over the kernels' time, per dtype and shape%s\n",
                         ops, kernels, cut ? " (the 128 shapes with the most kernel time)" : "");
  g_string_append(out, "gemm_table = ");
  for (guint i = 0; i < timed->len; i++) {
    const SimKinetoGemm *g = g_ptr_array_index(timed, i);
    g_string_append_printf(out, "%s%s:%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT ":", i ? ", " : "",
                           g->dtype, g->m, g->n, g->k);
    append_plain(out, g->flops / g->seconds / 1e12);
    g_string_append(out, "TFLOPS");
  }
  g_string_append_c(out, '\n');
  static const char *const dtypes[] = { "fp32", "bf16", "fp16" };
  for (guint d = 0; d < G_N_ELEMENTS(dtypes); d++) {
    const SimKinetoGemm *best = NULL;
    for (guint i = 0; i < timed->len; i++) {
      const SimKinetoGemm *g = g_ptr_array_index(timed, i);
      if (g_strcmp0(g->dtype, dtypes[d]) == 0 && (best == NULL || g->flops / g->seconds > best->flops / best->seconds))
        best = g;
    }
    if (best == NULL) {
      g_string_append_printf(missing, "#   matmul_tflops_%s: no %s GEMM in the trace\n", dtypes[d], dtypes[d]);
      continue;
    }
    g_string_append_printf(out,
                           "# the best rate of the trace's %s shapes (%" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT
                           "x%" G_GUINT64_FORMAT "): this run's shapes, not a sweep for the largest%s\n"
                           "matmul_tflops_%s = ",
                           dtypes[d], best->m, best->n, best->k,
                           d == 0 ? "; fp32 GEMMs run as TF32 where PyTorch allows it, which the trace does not say" : "",
                           dtypes[d]);
    append_plain(out, best->flops / best->seconds / 1e12);
    g_string_append_c(out, '\n');
  }
}

static void
format_link(GString *out, GString *missing, const SimKineto *k)
{
  static const char *const names[2] = { "h2d", "d2h" };
  static const char *const events[2] = { "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)" };
  for (guint d = 0; d < 2; d++) {
    const SimKinetoCopies *p = &k->pinned[d];
    if (p->count == 0 || p->seconds <= 0 || p->bytes == 0) {
      g_string_append_printf(missing, "#   %s_bandwidth, %s_table: no pinned %s copies", names[d], names[d],
                             d ? "device-to-host" : "host-to-device");
      if (k->pageable[d].count)
        g_string_append_printf(missing, " (%u pageable ones: their rate includes the host's staging copy, not "
                               "the rate these keys mean)", k->pageable[d].count);
      g_string_append_c(missing, '\n');
      continue;
    }
    g_string_append_printf(out, "# %u \"%s\" events: %" G_GUINT64_FORMAT " bytes over their summed time\n%s_bandwidth = ",
                           p->count, events[d], p->bytes, names[d]);
    append_plain(out, (double)p->bytes / p->seconds / 1e9);
    g_string_append(out, "GB/s\n");
    /* Per size, the largest SIM_LINK_MAX_POINTS. */
    guint n = 0, first = 0;
    for (guint i = 0; i < k->pinned_sizes->len; i++)
      if (g_array_index(k->pinned_sizes, SimKinetoCopySize, i).direction == (SimKinetoDirection)d)
        n++;
    g_string_append_printf(out, "# the same per copy size%s\n%s_table = ",
                           n > SIM_LINK_MAX_POINTS ? " (the 64 largest sizes)" : "", names[d]);
    guint skip = n > SIM_LINK_MAX_POINTS ? n - SIM_LINK_MAX_POINTS : 0, seen = 0;
    for (guint i = 0; i < k->pinned_sizes->len; i++) {
      const SimKinetoCopySize *c = &g_array_index(k->pinned_sizes, SimKinetoCopySize, i);
      if (c->direction != (SimKinetoDirection)d || seen++ < skip)
        continue;
      g_string_append_printf(out, "%s%" G_GUINT64_FORMAT "B:", first++ ? ", " : "", c->size);
      append_plain(out, (double)c->size * c->count / c->seconds / 1e9);
      g_string_append(out, "GB/s");
    }
    g_string_append_c(out, '\n');
  }
}

char *
sim_kineto_profile_format(const SimKineto *k, const char *trace)
{
  g_autoptr(GString) device = g_string_new(NULL), link = g_string_new(NULL), missing = g_string_new(NULL);
  if (k->has_device) {
    g_string_append_printf(device, "# deviceProperties id %" G_GINT64_FORMAT " (%s): totalGlobalMem\nmemory = %" G_GINT64_FORMAT "B\n",
                           k->device_id, k->device_name, k->device_memory);
    if (k->device_sms > 0)
      g_string_append_printf(device, "# deviceProperties id %" G_GINT64_FORMAT ": numSms\nsm_count = %" G_GINT64_FORMAT "\n",
                             k->device_id, k->device_sms);
    else
      g_string_append(missing, "#   sm_count: deviceProperties has no numSms\n");
  } else {
    g_string_append(missing, "#   memory, sm_count: the trace has no deviceProperties for the kernels' device\n");
  }
  format_gemms(device, missing, k);
  if (k->dtod.count && k->dtod.seconds > 0) {
    g_string_append_printf(device,
                           "# %u \"Memcpy DtoD\" events of 1 MiB or more, %" G_GUINT64_FORMAT " bytes: each byte read "
                           "and written, 2 * bytes over their summed time\nhbm_bandwidth = ",
                           k->dtod.count, k->dtod.bytes);
    append_plain(device, 2.0 * (double)k->dtod.bytes / k->dtod.seconds / 1e9);
    g_string_append(device, "GB/s\n");
  } else {
    g_string_append(missing, "#   hbm_bandwidth: no device-to-device copy of 1 MiB or more\n");
  }
  format_link(link, missing, k);
  GString *out = g_string_new(NULL);
  g_string_append_printf(out,
                         "# A device profile derived by `offsim check --write-profile` from the torch.profiler trace\n"
                         "# %s: figures this run achieved, from its kernels and copies, not a calibration.\n"
                         "# Include it after a full profile (include = profiles/NAME.ini, THIS.ini): its keys win.\n"
                         "# Left out, not derivable from this trace:\n%s"
                         "#   matmul_tflops, efficiency, gemm_tile, attention_tflops, attention_backward_tflops,\n"
                         "#   launch_overhead, latency, bidir_bandwidth, pageable_factor, compute_slowdown, host_alloc:\n"
                         "#   no trace event measures them alone\n",
                         trace, missing->str);
  if (device->len)
    g_string_append_printf(out, "[device]\n%s", device->str);
  if (link->len)
    g_string_append_printf(out, "%s[link]\n%s", device->len ? "\n" : "", link->str);
  return g_string_free(out, FALSE);
}
