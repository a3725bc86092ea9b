/* cli/signals.c — how offsim ends on SIGINT, SIGTERM and SIGHUP.
 *
 * Process policy belongs to the program, not to the libraries it links:
 * sim/base/output.h keeps a registry of the temporaries it writes and the
 * child writing into them (gnuplot), and this handler empties it.  On any of
 * the three signals: kill and reap gnuplot (so that it cannot create a file
 * again), remove every registered temporary, then end the process as the
 * signal would have: the handler that was there before is put back and the
 * signal raised again.  A signal that was ignored when offsim started
 * (`nohup`, a background job) stays ignored.  Only SIGKILL or a crash can
 * leave a `.NAME.XXXXXX` behind.
 */
#define _POSIX_C_SOURCE 200809L

#include "cli/cli.h"

#include "base/output.h"

#include <signal.h>

static const int cleanup_signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction previous[G_N_ELEMENTS(cleanup_signals)];

static void
on_signal(int sig)
{
  sim_output_temp_cleanup();
  for (guint i = 0; i < G_N_ELEMENTS(cleanup_signals); i++)
    if (cleanup_signals[i] == sig)
      sigaction(sig, &previous[i], NULL);
  raise(sig); /* delivered when this handler returns */
}

void
cli_signals_install(void)
{
  struct sigaction ours = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
  sigemptyset(&ours.sa_mask);
  for (guint i = 0; i < G_N_ELEMENTS(cleanup_signals); i++)
    sigaddset(&ours.sa_mask, cleanup_signals[i]); /* one signal's cleanup at a time */
  for (guint i = 0; i < G_N_ELEMENTS(cleanup_signals); i++) {
    sigaction(cleanup_signals[i], NULL, &previous[i]);
    if (!(previous[i].sa_flags & SA_SIGINFO) && previous[i].sa_handler == SIG_IGN)
      continue;
    sigaction(cleanup_signals[i], &ours, NULL);
  }
}
