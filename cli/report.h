/* cli/report.h — results as a table for people, CSV and JSON for programs.
 *
 * The JSON object of one result has exactly the fields listed in
 * docs/scenarios.md ("Report formats"), in that order: the contract fields,
 * then the extras (capacity and where each peak was).  CSV has the same
 * columns, generated from that object, so the two cannot drift apart.
 * Numbers are written with up to 15 significant digits so that 9.36 prints
 * as 9.36, not 9.3599999999999994: the output is the same bytes on every run
 * and every machine.
 *
 * Ownership: results and scenarios are only read.  Returned strings are new
 * (g_free), the JsonNode too (json_node_unref); the CSV functions append to
 * the caller's GString.
 */
#pragma once

#include "input/scenario.h"
#include "result/result.h"

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The output formats, one row each: X(ENUM suffix, name --format takes).
 * The enum, the masks, the names, the parser's message and --format's
 * --help line (cli_report_format_help) are made from it. */
#define CLI_FORMAT_MAP(X) \
  X(TABLE, table)         \
  X(CSV, csv)             \
  X(JSON, json)

#define CLI_FORMAT_ENUM_(e, name) CLI_FORMAT_##e,
typedef enum {
  CLI_FORMAT_MAP(CLI_FORMAT_ENUM_)
  CLI_FORMAT_COUNT,
} CliFormat;
#undef CLI_FORMAT_ENUM_

/* Which formats a command prints, as a mask of 1 << CliFormat. */
#define CLI_FORMAT_MASK_(e, name) CLI_FORMATS_##e = 1 << CLI_FORMAT_##e,
typedef enum {
  CLI_FORMAT_MAP(CLI_FORMAT_MASK_)
  CLI_FORMATS_ALL = (1 << CLI_FORMAT_COUNT) - 1,
} CliFormats;
#undef CLI_FORMAT_MASK_

/* --format's value: one of the names of `allowed` ("table", "csv",
 * "json"), NULL meaning table (every command prints one).  Anything else
 * is an input error listing the allowed names: every command parses
 * --format here, so the messages agree. */
gboolean cli_report_parse_format(const char *text, CliFormats allowed, CliFormat *format, GError **error);

/* --format's --help line for a command printing `allowed`: "Output: table
 * (default), csv or json".  A new string. */
char *cli_report_format_help(CliFormats allowed);

/* `results` holds SimResult*.  `single` prints `run`'s shape: one JSON object
 * instead of {"scenario", "results"}. */
char *cli_report_format(const SimScenario *scenario, GPtrArray *results, CliFormat format, gboolean single);

/* CSV: the header, then one row per result, each after `prefix` fields
 * (already CSV-encoded, comma-terminated, or NULL): a sweep puts its swept
 * values there. */
void cli_report_csv_header(GString *out, const char *prefix);
void cli_report_csv_row(GString *out, const char *prefix, const SimResult *result);
/* How many fields the header and a row have after the prefix. */
guint cli_report_csv_columns(void);

/* One result as a JSON object node (the fields above). */
JsonNode *cli_report_result_json(const SimResult *result);

/* Serialises a JSON tree, pretty-printed, with our number formatting. */
char *cli_report_json_to_string(JsonNode *node);

G_END_DECLS
