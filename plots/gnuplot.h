/* plots/gnuplot.h — gnuplot through a pipe: quoting, charts, rendering.
 *
 * A chart is gnuplot text in two parts: datablocks, which hold numbers only
 * (never a user string, so no data line can end a block early or be read as
 * a command), and the commands that draw them after `reset`.  A script holds
 * every chart's data once and its commands once per output format, each time
 * after its terminal and output file.
 *
 * Every user-supplied string (scenario, policy, layer and tensor names, paths)
 * reaches gnuplot only through plots_gnuplot_quote(): a single-quoted string,
 * in which gnuplot expands nothing (no backquoted commands, no macros, no
 * backslash escapes), with embedded single quotes doubled and line breaks
 * and other control characters dropped so that it cannot end the command it
 * sits in.  Every terminal is set `noenhanced`, so '_', '^', '@' and braces
 * print as themselves.  User strings never go into comments (a comment ends
 * at a line break) nor into datablocks.
 *
 * Rendering spawns `gnuplot` from PATH with an argv (no shell), writes the
 * script to its stdin and collects its stderr for the error message.  Each
 * output is first written under a temporary name in the target directory and
 * renamed once gnuplot has exited 0, so nobody sees a half-written picture and
 * a failed run leaves none behind.  The temporaries are registered
 * (sim_output_temp_open) and gnuplot is the registered child while it runs:
 * SIGINT, SIGTERM or SIGHUP kill it and remove them before offsim dies.
 *
 * Errors: SIM_ERROR_TOOL when gnuplot is not installed or runs and fails
 * (exit 3; the message carries the first line of what it said on stderr),
 * SIM_ERROR_INPUT when the target directory cannot be created or written
 * (exit 2).
 * Messages name no command-line option; the caller passes its own
 * (PlotsRenderNames) or prefixes them.
 *
 * Ownership: a PlotsChart owns its name and both strings and is freed with
 * plots_gnuplot_chart_free (a GPtrArray of charts takes that as its free
 * function).  Every char* returned is new and the caller's to g_free, except
 * plots_gnuplot_number (it returns `buf`) and plots_gnuplot_extension (a
 * static string).  Functions that take a GPtrArray of charts only read it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  PLOTS_FORMAT_PNG = 1 << 0, /* pngcairo */
  PLOTS_FORMAT_SVG = 1 << 1,
  PLOTS_FORMAT_ALL = PLOTS_FORMAT_PNG | PLOTS_FORMAT_SVG,
} PlotsFormat;

typedef struct {
  char *name;        /* output file name without extension; [A-Za-z0-9._-] only */
  guint width;       /* pixels, for PNG and SVG alike */
  guint height;
  GString *data;     /* datablock definitions */
  GString *commands; /* drawing commands, run after `reset` */
} PlotsChart;

/* `name` must already be a safe file name (plots_gnuplot_file_name). */
PlotsChart *plots_gnuplot_chart_new(const char *name, guint width, guint height);
void plots_gnuplot_chart_free(PlotsChart *chart);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PlotsChart, plots_gnuplot_chart_free)

/* The one quoting function: `text` as a gnuplot single-quoted string
 * literal, quotes included.  Invalid UTF-8 is replaced, not passed on. */
char *plots_gnuplot_quote(const char *text);

/* A file-name part from a user string: characters outside [A-Za-z0-9._-]
 * become '_', and a leading '.' too, so the name is neither hidden nor a
 * path. */
char *plots_gnuplot_file_name(const char *text);

/* Datablocks: "$NAME << EOD", rows of numbers, "EOD".  NaN is written as
 * NaN, which gnuplot treats as a missing point. */
void plots_gnuplot_data_begin(PlotsChart *chart, const char *block);
void plots_gnuplot_data_row(PlotsChart *chart, guint n, const double *values);
void plots_gnuplot_data_end(PlotsChart *chart);

/* A number for a command, locale-independent ("%.10g"); `buf` holds
 * G_ASCII_DTOSTR_BUF_SIZE bytes. */
const char *plots_gnuplot_number(char *buf, double value);

/* Appends `set linetype` 1..n in the series colours, which every chart
 * shares so that a policy keeps its colour across the memory, comparison
 * and sweep charts; `style` follows each ("lw 2 pt 7 ps 1.5"). */
void plots_gnuplot_series_linetypes(GString *commands, guint n, const char *style);

/* The colour of text in series colour `series` (from 0): the series colour,
 * darkened until its contrast ratio on white is at least 4.5:1 (WCAG AA for
 * text; the yellow, pink, teal and grey of the series are lighter), as
 * "#rrggbb" into `out`. */
void plots_gnuplot_series_text_color(guint series, char out[8]);

/* The WCAG contrast ratio of "#rrggbb" on white, from 1 to 21. */
double plots_gnuplot_contrast_on_white(const char *color);

/* Appends "COMMAND 'TITLE' . "\n" . 'SUBTITLE'": a two-line title whose lines
 * are both quoted, for `set title` or `set multiplot title`. */
void plots_gnuplot_title(GString *commands, const char *command, const char *title, const char *subtitle);

/* "png", "svg" or "both".  The error (bad input) names no option: the
 * caller prefixes its own. */
gboolean plots_gnuplot_parse_formats(const char *text, guint *formats, GError **error);

/* "png" or "svg" for one PlotsFormat bit. */
const char *plots_gnuplot_extension(PlotsFormat format);

/* The script that draws `charts` (PlotsChart*) in each of `formats`, to
 * DIR/NAME.EXT, or NAME.EXT relative to where gnuplot runs when `dir` is
 * NULL.  It runs anywhere gnuplot does: nothing in it depends on this
 * machine but those paths. */
char *plots_gnuplot_script(GPtrArray *charts, guint formats, const char *dir);

/* TRUE when a `gnuplot` is on PATH. */
gboolean plots_gnuplot_available(void);

/* Feeds `script` to gnuplot and waits for it; fails (SIM_ERROR_TOOL) with
 * the first line of its stderr that says something. */
gboolean plots_gnuplot_run(const char *script, GError **error);

/* The caller's words in rendering's messages, since plots/ knows no option
 * names.  `dir_option` ("--plot") prefixes errors about the directory, as
 * sim_output_save's `option` does; NULL: the directory alone.
 * `without_gnuplot`, when not NULL, follows "gnuplot is not installed
 * (...)" after "; ": what the user can do without it. */
typedef struct {
  const char *dir_option;
  const char *without_gnuplot;
} PlotsRenderNames;

/* Renders every chart in each format into `dir` (created if missing), as
 * DIR/NAME.EXT: each file appears whole or not at all, and none appears
 * when gnuplot fails.  `names` may be NULL. */
gboolean plots_gnuplot_render(GPtrArray *charts, guint formats, const char *dir, const PlotsRenderNames *names,
                              GError **error);

G_END_DECLS
