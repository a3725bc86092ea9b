/* sim/input/kineto_profile.h — a device profile derived from a Kineto trace's
 * kernels and copies (`offsim check --trace FILE --write-profile OUT`).
 *
 * The profile is the INI of scenarios/profiles/ (docs/reference.md), with
 * only the keys the trace measures, each after a comment naming the events
 * it came from:
 *   [device] memory, sm_count    the kernels' device in "deviceProperties"
 *                                (totalGlobalMem, numSms);
 *            gemm_table          per dtype and shape of the aten::mm, addmm,
 *                                bmm and baddbmm ops with recorded shapes:
 *                                2·m·n·k·batch over their kernels' time, the
 *                                128 shapes with the most kernel time;
 *            matmul_tflops_DTYPE the best of those shapes' rates (of the
 *                                shapes this run had, not a sweep);
 *            hbm_bandwidth       device-to-device copies of 1 MiB or more:
 *                                each byte read and written, 2·bytes over
 *                                their time;
 *   [link]   h2d_bandwidth, d2h_bandwidth  pinned copies' bytes over their
 *                                time; h2d_table, d2h_table the same per copy
 *                                size (at most 64 sizes, the largest).
 * A key the trace cannot give is left out, never defaulted, and the file's
 * head lists each with the reason, so that a scenario includes the profile
 * after a full one (`include = profiles/h100-sxm-pcie-gen5.ini, OUT`): its
 * keys win, the rest stay the full profile's.
 */
#pragma once

#include "input/kineto.h"

G_BEGIN_DECLS

/* The profile's text; `trace` names the source in its comments. */
char *sim_kineto_profile_format(const SimKineto *k, const char *trace);

G_END_DECLS
