/* ledger/ledger.h — the seed chapter's activation budget ledger, exactly
 * (the chapter: docs/reference.md, The seed chapter).
 *
 * A port of summarize_activation_offload, estimate_round_trip_transfer_ms,
 * recommend_offload_policy and compare_offload_vs_checkpointing from chapter
 * 42 ("Activation Offload"), with the same inputs, the same order of checks,
 * the same error cases and the same figures.  It knows nothing of the engine:
 * it answers "which chunks must leave the device to fit this budget, and is
 * the copy worth it" from sizes, a reuse delay and one bandwidth.
 *
 * The ledger:
 *   - offloadable chunks are candidates, ordered by reuse delay descending,
 *     then bytes descending, then name (byte order, which for UTF-8 is
 *     Python's code-point order); they are offloaded one by one while the
 *     kept bytes exceed the budget;
 *   - offloaded = total - kept; overflow = max(kept - budget, 0); feasible
 *     when overflow is 0; kept names are in input order, offloaded names in
 *     offload order;
 *   - transfer_ms is one way, bytes / (GiB/s * 2^30) * 1000; round_trip_ms is
 *     estimate_round_trip_transfer_ms (twice the unrounded one way);
 *   - pressure = total / budget, saved = offloaded / total (0 when total is
 *     0).  Times are rounded to 2 decimals and ratios to 3 with Python's
 *     round() (ledger_round), and the verdict and the checkpoint
 *     comparison read the rounded figures, as the chapter's do.
 *
 * Ratios equal Python's bit for bit while totals stay below 2^53 bytes (8
 * PiB), where an int64 converts to a double exactly; past that Python divides
 * the exact integers and we divide their nearest doubles.
 *
 * Bandwidth is in GiB/s, the chapter's `bandwidth_gbps` (its code reads it
 * as GiB/s): 8.0 here is "8GiB/s" on the command line.
 *
 * Errors are SIM_ERROR_INPUT with the chapter's own messages.  Ownership:
 * chunk arrays own their chunks (ledger_chunk_free); a summary owns
 * its name arrays; the caller owns whatever a function returns.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The chapter's ActivationChunkSpec.  Signed, so that the checks on negative
 * bytes and delays are the API's, not the caller's. */
typedef struct {
  char *name;
  gint64 bytes;
  gint64 reuse_delay_layers; /* layers until the backward reads it again: larger is colder */
  gboolean offloadable;
} LedgerChunk;

LedgerChunk *ledger_chunk_new(const char *name, gint64 bytes, gint64 reuse_delay_layers,
                                             gboolean offloadable);
void ledger_chunk_free(LedgerChunk *chunk);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(LedgerChunk, ledger_chunk_free)

/* A GPtrArray of LedgerChunk*, freeing them. */
GPtrArray *ledger_chunks_new(void);

/* The chapter's ActivationOffloadSummary, plus round_trip_ms and the
 * bandwidth it was made with. */
typedef struct {
  gint64 total_bytes;
  gint64 budget_bytes;
  gint64 kept_bytes;
  gint64 offloaded_bytes;
  double bandwidth_gibps;
  double transfer_ms;   /* one way, rounded to 2 decimals */
  double round_trip_ms; /* out and back, rounded to 2 decimals */
  double pressure_ratio; /* rounded to 3 decimals */
  double saved_ratio;    /* rounded to 3 decimals */
  GPtrArray *offloaded_names; /* char*, in offload order */
  GPtrArray *kept_names;      /* char*, in input order */
  gboolean feasible;
  gint64 overflow_bytes;
} LedgerSummary;

void ledger_summary_free(LedgerSummary *summary);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(LedgerSummary, ledger_summary_free)

typedef enum {
  LEDGER_ACCEPT,
  LEDGER_TUNE,
  LEDGER_REJECT,
} LedgerVerdict;

/* "accept", "tune" or "reject". */
const char *ledger_verdict_name(LedgerVerdict verdict);

/* The chapter's thresholds: saved >= 0.25 and one way <= 60 ms. */
#define LEDGER_MIN_SAVED_RATIO 0.25
#define LEDGER_MAX_TRANSFER_MS 60.0

/* Python's round(x, ndigits) on a double: the decimal nearest to the exact
 * binary value, ties to even (round(2.675, 2) is 2.67, round(0.125, 2) is
 * 0.12).  Non-finite values come back unchanged. */
double ledger_round(double x, int ndigits);

/* summarize_activation_offload.  Checks, in the chapter's order: budget > 0,
 * bandwidth > 0 (and finite), unique names, bytes >= 0, delays >= 0; then, as
 * Python's integers cannot but ours can, that the total fits in an int64. */
LedgerSummary *ledger_summarize(GPtrArray *chunks, gint64 budget_bytes, double bandwidth_gibps,
                                               GError **error);

/* estimate_round_trip_transfer_ms: 2 * one way, rounded to 2 decimals. */
gboolean ledger_round_trip_ms(gint64 offloaded_bytes, double bandwidth_gibps, double *ms, GError **error);

/* recommend_offload_policy.  In the chapter's order: nothing offloaded is a
 * reject before the thresholds are looked at (so negative thresholds pass
 * unnoticed there); then negative thresholds are an error; then infeasible is
 * a reject; accept when kept <= budget, saved >= min and one way <= max; tune
 * when saved >= min / 2 and one way <= max * 2; else reject. */
gboolean ledger_recommend(const LedgerSummary *summary, double min_saved_ratio, double max_transfer_ms,
                                  LedgerVerdict *verdict, GError **error);

/* compare_offload_vs_checkpointing: bytes saved per ms of extra time, each
 * time floored at 1e-6 ms; offload is preferred on a tie. */
typedef struct {
  double offload_score;    /* offloaded bytes / max(transfer_ms, 1e-6), rounded to 3 decimals */
  double checkpoint_score; /* checkpoint saved / max(extra ms, 1e-6), rounded to 3 decimals */
  gboolean prefer_offload;
} LedgerComparison;

gboolean ledger_compare_checkpointing(const LedgerSummary *summary, gint64 checkpoint_saved_bytes,
                                              double checkpoint_extra_ms, LedgerComparison *comparison,
                                              GError **error);

/* Chunks from CSV text: a header that is exactly
 * `name,bytes,reuse_delay_layers,offloadable`, then one chunk a line.
 * - bytes: a plain integer (the chapter's bytes) or a size with a unit
 *   (`256MiB`, as everywhere in offsim);
 * - reuse_delay_layers: a plain integer;
 * - offloadable: true/false, yes/no or 1/0, any case;
 * - names: non-empty, unique, UTF-8, no control characters;
 * - fields may be quoted as in RFC 4180 ("a,b" and "say ""hi"""), but a
 *   quoted field may not span lines; spaces and tabs around a field are
 *   dropped; LF or CRLF line ends; the last line may lack its newline; blank
 *   lines and a leading UTF-8 byte-order mark are skipped.
 * Errors say "ORIGIN:LINE: COLUMN: what was expected".  Negative bytes or
 * delays and duplicate names are caught here, with their line, before the
 * ledger would refuse them. */
GPtrArray *ledger_parse_csv(const char *text, gsize length, const char *origin, GError **error);
GPtrArray *ledger_load_csv(const char *path, GError **error);

G_END_DECLS
