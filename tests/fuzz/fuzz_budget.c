/* Fuzz target: the budget ledger's chunk CSV (ledger/ledger.c), then the
 * ledger itself on what parsed, at a tight and a loose budget. */
#include "ledger/ledger.h"

#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static void
ledger(GPtrArray *chunks, gint64 budget, double gibps)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(LedgerSummary) s = ledger_summarize(chunks, budget, gibps, &error);
  fuzz_expect_input_error(error, "ledger_summarize");
  if (s == NULL)
    return;
  if (s->kept_bytes + s->offloaded_bytes != s->total_bytes || s->kept_bytes < 0 || s->offloaded_bytes < 0 ||
      s->kept_names->len + s->offloaded_names->len != chunks->len || (s->feasible != (s->kept_bytes <= budget))) {
    fprintf(stderr, "fuzz_budget: inconsistent ledger: total %" G_GINT64_FORMAT ", kept %" G_GINT64_FORMAT
            ", offloaded %" G_GINT64_FORMAT "\n", s->total_bytes, s->kept_bytes, s->offloaded_bytes);
    abort();
  }
  LedgerVerdict verdict;
  LedgerComparison cmp;
  if (!ledger_recommend(s, 0.25, 60, &verdict, &error))
    fuzz_expect_input_error(error, "ledger_recommend");
  g_clear_error(&error);
  if (!ledger_compare_checkpointing(s, s->total_bytes, 1.5, &cmp, &error))
    fuzz_expect_input_error(error, "ledger_compare_checkpointing");
}

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) chunks = ledger_parse_csv((const char *)data, size, "fuzz.csv", &error);
  fuzz_expect_input_error(error, "ledger_parse_csv");
  if (chunks == NULL)
    return 0;
  ledger(chunks, 384ll << 20, 8.0);
  ledger(chunks, 1, 1.0 / (1ll << 30)); /* one byte of budget, 1 B/s */
  ledger(chunks, G_MAXINT64, 1e9);
  return 0;
}
