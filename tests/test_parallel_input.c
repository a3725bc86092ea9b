/* tests/test_parallel_input.c — the scenario keys of pipeline and data
 * parallelism ([parallel]), of the links the GPUs of a node share and their
 * collective figures ([node]), of the network between nodes ([network]) and
 * a policy's `stages`: their defaults without the groups, every key
 * read into its field, and each bad input one SIM_ERROR_INPUT line (exit
 * status 2) naming the file, the group and the key.  The input side only:
 * nothing here runs a pipeline. */
#include "testutil.h"

#include "base/error.h"
#include "input/schema.h"

#include <math.h>
#include <string.h>

/* Asserts that `piece` occurs in `msg`, printing the whole message if not. */
#define assert_has(msg, piece)                                                                             \
  ck_assert_msg(strstr((msg), (piece)) != NULL, "expected \"%s\" in the message: %s", (piece), (msg))

#define MACHINE "[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
#define MODEL(layers) "[model]\nlayers = " #layers "\nforward = 1ms\ninput = 1MiB\ntensors = a:8MiB\n"
/* Eight explicit layers: enough to cut into 2, 4 or 8 chunks. */
#define BASE8 MACHINE MODEL(8)

/* ---- helpers -------------------------------------------------------------- */

/* The message of a scenario that must not load: bad input, exit status 2, one line. */
static char *
input_error(const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SimScenario) s = sim_scenario_load_data(text, "test.ini", &error);
  ck_assert_msg(s == NULL, "loaded but should not have:\n%s", text);
  ck_assert_msg(g_error_matches(error, SIM_ERROR, SIM_ERROR_INPUT), "not SIM_ERROR_INPUT: %s",
                error ? error->message : "(no error)");
  ck_assert_int_eq(sim_error_exit_code(error), 2);
  ck_assert_msg(strchr(error->message, '\n') == NULL, "not one line: %s", error->message);
  return g_strdup(error->message);
}

static void
assert_split(const SimParallel *par, const guint *expected, guint n)
{
  ck_assert_ptr_nonnull(par->split);
  ck_assert_uint_eq(par->split->len, n);
  for (guint i = 0; i < n; i++)
    ck_assert_msg(g_array_index(par->split, guint, i) == expected[i], "split[%u] = %u, expected %u", i,
                  g_array_index(par->split, guint, i), expected[i]);
}

/* Asserts socket_of[0 .. strlen(expected)) against a string of digits. */
static void
assert_sockets(const SimNode *node, const char *expected)
{
  for (guint g = 0; expected[g]; g++)
    ck_assert_msg(node->socket_of[g] == (guint)(expected[g] - '0'), "GPU %u: socket %u, expected %c", g,
                  node->socket_of[g], expected[g]);
}

/* Asserts p->stages against a string of '1' and '0', one per stage. */
static void
assert_stages(const SimPolicy *p, const char *expected)
{
  ck_assert_ptr_nonnull(p->stages);
  ck_assert_uint_eq(p->stages->len, strlen(expected));
  for (guint i = 0; i < p->stages->len; i++)
    ck_assert_msg(g_array_index(p->stages, gboolean, i) == (expected[i] == '1'), "%s: stage %u is %d, expected %c",
                  p->name, i, g_array_index(p->stages, gboolean, i), expected[i]);
}

static const SimPolicy *
policy(const SimScenario *s, const char *name)
{
  const SimPolicy *p = sim_scenario_policy(s, name);
  ck_assert_msg(p != NULL, "no policy %s", name);
  return p;
}

/* ---- defaults ------------------------------------------------------------- */

START_TEST(test_defaults_without_the_groups)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(BASE8 "[policy.x]\nkind = offload\n");
  const SimParallel *par = &s->parallel;
  ck_assert_uint_eq(par->pp, 1);
  ck_assert_uint_eq(par->microbatches, 1);
  ck_assert_uint_eq(par->dp, 1);
  ck_assert_uint_eq(par->virtual_chunks, 1);
  ck_assert_uint_eq(par->schedule, SIM_PIPE_1F1B);
  ck_assert_ptr_null(par->split);
  ck_assert_double_eq(par->p2p_bandwidth, 450e9);
  ck_assert_double_eq(par->p2p_latency, 0);
  ck_assert(!sim_parallel_active(par));

  const SimNode *node = &s->machine.link.node;
  ck_assert_uint_eq(node->gpus_per_switch, 1);
  ck_assert_uint_eq(node->sockets, 1);
  ck_assert_double_eq(node->switch_bandwidth, 0);
  ck_assert_double_eq(node->host_memory_bandwidth, 0);
  for (guint g = 0; g < SIM_NODE_MAX_GPUS; g++)
    ck_assert_uint_eq(node->socket_of[g], 0);

  ck_assert_ptr_null(policy(s, "x")->stages);
  /* The default set names no stages either. */
  g_autoptr(SimScenario) d = test_scenario_from_text(BASE8);
  for (guint i = 0; i < d->policies->len; i++)
    ck_assert_ptr_null(((const SimPolicy *)g_ptr_array_index(d->policies, i))->stages);
}
END_TEST

/* The struct defaults are the schema's, and what an empty group loads as. */
START_TEST(test_struct_defaults_are_the_loaded_values)
{
  SimParallel par;
  sim_scenario_parallel_defaults(&par);
  g_autoptr(SimScenario) s = test_scenario_from_text(BASE8 "[parallel]\n[node]\n");
  ck_assert_uint_eq(par.pp, s->parallel.pp);
  ck_assert_uint_eq(par.microbatches, s->parallel.microbatches);
  ck_assert_uint_eq(par.schedule, s->parallel.schedule);
  ck_assert_uint_eq(par.virtual_chunks, s->parallel.virtual_chunks);
  ck_assert_uint_eq(par.dp, s->parallel.dp);
  ck_assert_double_eq(par.p2p_bandwidth, s->parallel.p2p_bandwidth);
  ck_assert_double_eq(par.p2p_latency, s->parallel.p2p_latency);
  ck_assert_ptr_null(par.split);

  SimMachine m;
  sim_scenario_machine_defaults(&m);
  ck_assert(memcmp(&m.link.node, &s->machine.link.node, sizeof m.link.node) == 0);
  ck_assert_uint_eq(m.link.node.gpus_per_switch, 1);
  ck_assert_uint_eq(m.link.node.sockets, 1);
}
END_TEST

/* ---- every key ------------------------------------------------------------ */

START_TEST(test_parallel_keys)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(BASE8 "[parallel]\npp = 4\nmicrobatches = 8\nschedule = gpipe\n"
                                                           "dp = 2\np2p_bandwidth = 100GB/s\np2p_latency = 5us\n");
  const SimParallel *par = &s->parallel;
  ck_assert_uint_eq(par->pp, 4);
  ck_assert_uint_eq(par->microbatches, 8);
  ck_assert_uint_eq(par->schedule, SIM_PIPE_GPIPE);
  ck_assert_uint_eq(par->virtual_chunks, 1);
  ck_assert_uint_eq(par->dp, 2);
  ck_assert_uint_eq(par->sharding, SIM_SHARDING_NONE);
  ck_assert_ptr_null(par->split);
  ck_assert_double_eq(par->p2p_bandwidth, 100e9);
  ck_assert_double_eq_tol(par->p2p_latency, 5e-6, 1e-18);
  ck_assert_uint_eq(sim_parallel_gpus(par), 8);
  ck_assert(sim_parallel_active(par));

  g_autoptr(SimScenario) onef = test_scenario_from_text(BASE8 "[parallel]\npp = 2\nschedule = 1f1b\n");
  ck_assert_uint_eq(onef->parallel.schedule, SIM_PIPE_1F1B);

  /* Interleaved: 2 stages × 2 chunks of 2 layers, micro-batches a multiple of pp. */
  g_autoptr(SimScenario) inter =
    test_scenario_from_text(BASE8 "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\nmicrobatches = 4\n");
  ck_assert_uint_eq(inter->parallel.schedule, SIM_PIPE_INTERLEAVED);
  ck_assert_uint_eq(inter->parallel.virtual_chunks, 2);
  ck_assert_uint_eq(sim_parallel_chunks(&inter->parallel), 4);
  /* Chunk c on stage c mod pp: layers 0-1 and 4-5 on stage 0. */
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 1), 0);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 2), 1);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 5), 0);

  /* An even cut that does not divide is fine without interleaving: 3, 3, 2. */
  g_autoptr(SimScenario) uneven = test_scenario_from_text(BASE8 "[parallel]\npp = 3\n");
  guint bounds[4];
  sim_parallel_chunk_bounds(&uneven->parallel, 8, bounds);
  ck_assert_uint_eq(bounds[1], 3);
  ck_assert_uint_eq(bounds[2], 6);
  ck_assert_uint_eq(bounds[3], 8);

  /* As many stages as layers is the most there can be. */
  g_autoptr(SimScenario) full = test_scenario_from_text(BASE8 "[parallel]\npp = 8\n");
  ck_assert_uint_eq(full->parallel.pp, 8);
}
END_TEST

START_TEST(test_split)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(BASE8 "[parallel]\npp = 2\nsplit = 3, 5\n");
  assert_split(&s->parallel, (const guint[]){ 3, 5 }, 2);
  guint bounds[3];
  sim_parallel_chunk_bounds(&s->parallel, 8, bounds);
  ck_assert_uint_eq(bounds[1], 3);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&s->parallel, 8, 2), 0);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&s->parallel, 8, 3), 1);

  /* pp × virtual entries in model order; with a split the chunks need not be equal. */
  g_autoptr(SimScenario) inter = test_scenario_from_text(
    BASE8 "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\nmicrobatches = 2\nsplit = 1,3,2,2\n");
  assert_split(&inter->parallel, (const guint[]){ 1, 3, 2, 2 }, 4);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 0), 0);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 3), 1);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 4), 0);
  ck_assert_uint_eq(sim_parallel_stage_of_layer(&inter->parallel, 8, 7), 1);
}
END_TEST

START_TEST(test_node_keys)
{
  g_autoptr(SimScenario) s =
    test_scenario_from_text(BASE8 "[parallel]\npp = 2\ndp = 2\n[node]\ngpus_per_switch = 2\nswitch_bandwidth = 64GB/s\n"
                                  "sockets = 2\nhost_memory_bandwidth = 200GB/s\ngpu_sockets = 1, 1, 0, 0\n");
  const SimNode *node = &s->machine.link.node;
  ck_assert_uint_eq(node->gpus_per_switch, 2);
  ck_assert_double_eq(node->switch_bandwidth, 64e9);
  ck_assert_uint_eq(node->sockets, 2);
  ck_assert_double_eq(node->host_memory_bandwidth, 200e9);
  assert_sockets(node, "1100");

  /* 0 is written out as "no such limit", bare or with a unit. */
  g_autoptr(SimScenario) zero =
    test_scenario_from_text(BASE8 "[node]\nswitch_bandwidth = 0\nhost_memory_bandwidth = 0GB/s\n");
  ck_assert_double_eq(zero->machine.link.node.switch_bandwidth, 0);
  ck_assert_double_eq(zero->machine.link.node.host_memory_bandwidth, 0);
  /* More sockets than GPUs is allowed. */
  g_autoptr(SimScenario) many = test_scenario_from_text(BASE8 "[node]\nsockets = 4\ngpu_sockets = 3\n");
  assert_sockets(&many->machine.link.node, "3");
}
END_TEST

/* Without gpu_sockets: contiguous blocks, GPU g on socket g × sockets / GPUs,
 * GPUs numbered gpu = stage × dp + replica. */
START_TEST(test_node_default_sockets)
{
  g_autoptr(SimScenario) two = test_scenario_from_text(BASE8 "[parallel]\npp = 4\ndp = 2\n[node]\nsockets = 2\n");
  assert_sockets(&two->machine.link.node, "00001111");
  g_autoptr(SimScenario) three = test_scenario_from_text(BASE8 "[parallel]\npp = 4\n[node]\nsockets = 3\n");
  assert_sockets(&three->machine.link.node, "0012");
  g_autoptr(SimScenario) sparse = test_scenario_from_text(BASE8 "[parallel]\ndp = 2\n[node]\nsockets = 4\n");
  assert_sockets(&sparse->machine.link.node, "02");
  g_autoptr(SimScenario) one = test_scenario_from_text(BASE8 "[parallel]\npp = 4\n");
  assert_sockets(&one->machine.link.node, "0000");
}
END_TEST

START_TEST(test_stages)
{
  g_autoptr(SimScenario) s = test_scenario_from_text(
    BASE8 "[parallel]\npp = 4\n"
          "[policy.r]\nkind = resident\nstages = 3\n"
          "[policy.o]\nkind = offload\nstages = 0,2\n"
          "[policy.c]\nkind = checkpoint\nstages = 1-2\n"
          "[policy.p]\nkind = plan\nactions = keep,keep,keep,keep,keep,keep,keep,offload\nstages = all\n"
          "[policy.f]\nkind = offload\nstages = first:1\n"
          "[policy.l]\nkind = offload\nstages = last:3\n"
          "[policy.n]\nkind = checkpoint\nstages = none\n"
          "[policy.a]\nkind = offload\n");
  assert_stages(policy(s, "r"), "0001");
  assert_stages(policy(s, "o"), "1010");
  assert_stages(policy(s, "c"), "0110");
  assert_stages(policy(s, "p"), "1111");
  assert_stages(policy(s, "f"), "1000");
  assert_stages(policy(s, "l"), "0111");
  assert_stages(policy(s, "n"), "0000");
  ck_assert_ptr_null(policy(s, "a")->stages);

  /* Stage 0 alone is a stage of the single-GPU step. */
  g_autoptr(SimScenario) single = test_scenario_from_text(BASE8 "[policy.o]\nkind = offload\nstages = 0\n");
  assert_stages(policy(single, "o"), "1");
}
END_TEST

/* ---- bad input: [parallel] ------------------------------------------------ */

START_TEST(test_bad_counts)
{
  g_autofree char *pp = input_error(BASE8 "[parallel]\npp = 0\n");
  assert_has(pp, "test.ini: [parallel] pp: ");
  assert_has(pp, "expected a whole number from 1 to 256, got '0'");
  g_autofree char *mb = input_error(BASE8 "[parallel]\nmicrobatches = 0\n");
  assert_has(mb, "test.ini: [parallel] microbatches: ");
  assert_has(mb, "from 1");
  g_autofree char *dp = input_error(BASE8 "[parallel]\ndp = two\n");
  assert_has(dp, "test.ini: [parallel] dp: ");
  assert_has(dp, "got 'two'");
  g_autofree char *virt = input_error(BASE8 "[parallel]\nvirtual = 0\n");
  assert_has(virt, "test.ini: [parallel] virtual: ");
  g_autofree char *schedule = input_error(BASE8 "[parallel]\nschedule = zero-bubble\n");
  assert_has(schedule, "test.ini: [parallel] schedule: ");
  assert_has(schedule, "expected one of gpipe, 1f1b, interleaved, got 'zero-bubble'");
  g_autofree char *bw = input_error(BASE8 "[parallel]\np2p_bandwidth = 0\n");
  assert_has(bw, "test.ini: [parallel] p2p_bandwidth: ");
  g_autofree char *lat = input_error(BASE8 "[parallel]\np2p_latency = 5\n");
  assert_has(lat, "test.ini: [parallel] p2p_latency: ");
  g_autofree char *unknown = input_error(BASE8 "[parallel]\ntp = 2\n");
  assert_has(unknown, "test.ini: [parallel] tp: unknown key (expected one of pp, microbatches, schedule, virtual, dp, ep, "
                      "sharding, split, p2p_bandwidth, p2p_latency, bucket, offload_optimizer, offload_params)");
}
END_TEST

/* Sharding needs replicas to divide among, and parameters it can count
 * ([model]'s static is one size: nothing says what its parameters are). */
START_TEST(test_bad_sharding)
{
  static const char *const cases[][2] = {
    { "[parallel]\nsharding = full\n", "test.ini: [parallel] sharding: expected none with dp = 1 (sharding divides "
                                       "the static memory among data-parallel replicas), got full" },
    { "[parallel]\ndp = 2\nsharding = zero3\n", "expected one of none, optimizer, gradients, full, got 'zero3'" },
    { "[parallel]\ndp = 2\nsharding = optimizer\n",
      "test.ini: [parallel] sharding: expected none for a workload whose parameters are not counted" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = g_strconcat(BASE8, cases[i][0], NULL);
    g_autofree char *msg = input_error(text);
    assert_has(msg, cases[i][1]);
  }
  g_autoptr(SimScenario) none = test_scenario_from_text(BASE8 "[parallel]\nsharding = none\n");
  ck_assert_uint_eq(none->parallel.sharding, SIM_SHARDING_NONE);
}
END_TEST

START_TEST(test_virtual_needs_interleaved)
{
  g_autofree char *msg = input_error(BASE8 "[parallel]\npp = 2\nvirtual = 2\n");
  assert_has(msg, "test.ini: [parallel] virtual: ");
  assert_has(msg, "expected 1 with schedule = 1f1b");
  assert_has(msg, "got 2");
  g_autofree char *gpipe = input_error(BASE8 "[parallel]\npp = 2\nvirtual = 2\nschedule = gpipe\n");
  assert_has(gpipe, "test.ini: [parallel] virtual: ");
  assert_has(gpipe, "schedule = gpipe");
}
END_TEST

START_TEST(test_interleaved_microbatches)
{
  g_autofree char *msg =
    input_error(BASE8 "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\nmicrobatches = 3\n");
  assert_has(msg, "test.ini: [parallel] microbatches: ");
  assert_has(msg, "expected microbatches to be a multiple of pp (2) with schedule = interleaved");
  assert_has(msg, "got 3");
  /* Not given: the default 1 is not a multiple of 2 either; the schedule that asks is named. */
  g_autofree char *absent = input_error(BASE8 "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\n");
  assert_has(absent, "test.ini: [parallel] schedule: ");
  assert_has(absent, "microbatches");
}
END_TEST

START_TEST(test_too_many_gpus)
{
  g_autofree char *msg = input_error(BASE8 "[parallel]\npp = 8\ndp = 64\n");
  assert_has(msg, "test.ini: [parallel] dp: ");
  assert_has(msg, "expected pp × dp to be at most 256 GPUs, got 8 × 64 = 512");
  /* At the limit it loads. */
  g_autoptr(SimScenario) s = test_scenario_from_text(BASE8 "[parallel]\npp = 8\ndp = 32\n");
  ck_assert_uint_eq(sim_parallel_gpus(&s->parallel), 256);
}
END_TEST

START_TEST(test_bad_split)
{
  g_autofree char *count = input_error(BASE8 "[parallel]\npp = 2\nsplit = 2, 3, 3\n");
  assert_has(count, "test.ini: [parallel] split: ");
  assert_has(count, "expected one layer count per chunk, pp × virtual = 2 of them, got 3");
  g_autofree char *zero = input_error(BASE8 "[parallel]\npp = 2\nsplit = 8, 0\n");
  assert_has(zero, "test.ini: [parallel] split: ");
  assert_has(zero, "chunk 1: expected at least 1 layer, got 0 (a stage with no layers)");
  g_autofree char *sum = input_error(BASE8 "[parallel]\npp = 2\nsplit = 3, 4\n");
  assert_has(sum, "test.ini: [parallel] split: ");
  assert_has(sum, "expected layer counts adding up to the model's 8 layers, got 7");
  g_autofree char *over = input_error(BASE8 "[parallel]\npp = 2\nsplit = 5, 4\n");
  assert_has(over, "the model's 8 layers, got 9");
  g_autofree char *word = input_error(BASE8 "[parallel]\npp = 2\nsplit = 4, four\n");
  assert_has(word, "test.ini: [parallel] split: ");
  assert_has(word, "got 'four'");
  g_autofree char *empty = input_error(BASE8 "[parallel]\npp = 2\nsplit = 4,,4\n");
  assert_has(empty, "test.ini: [parallel] split: ");
  /* Interleaved: pp × virtual entries. */
  g_autofree char *inter =
    input_error(BASE8 "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\nmicrobatches = 2\nsplit = 4, 4\n");
  assert_has(inter, "pp × virtual = 4 of them, got 2");
}
END_TEST

START_TEST(test_chunks_without_layers)
{
  g_autofree char *pp = input_error(MACHINE MODEL(4) "[parallel]\npp = 8\n");
  assert_has(pp, "test.ini: [parallel] pp: ");
  assert_has(pp, "expected pp × virtual to be at most the model's 4 layers (some chunk would get no layers), got "
                 "8 × 1 = 8");
  g_autofree char *virt =
    input_error(MACHINE MODEL(4) "[parallel]\npp = 2\nvirtual = 4\nschedule = interleaved\nmicrobatches = 2\n");
  assert_has(virt, "test.ini: [parallel] virtual: ");
  assert_has(virt, "some chunk would get no layers");
  assert_has(virt, "got 2 × 4 = 8");
}
END_TEST

START_TEST(test_virtual_does_not_divide)
{
  g_autofree char *msg =
    input_error(MACHINE MODEL(10) "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\nmicrobatches = 2\n");
  assert_has(msg, "test.ini: [parallel] virtual: ");
  assert_has(msg, "expected pp × virtual to divide the model's 10 layers with schedule = interleaved");
  assert_has(msg, "got 2 × 2 = 4");
  /* A split lifts it: the chunks may differ. */
  g_autoptr(SimScenario) s = test_scenario_from_text(
    MACHINE MODEL(10) "[parallel]\npp = 2\nvirtual = 2\nschedule = interleaved\nmicrobatches = 2\nsplit = 3,3,2,2\n");
  assert_split(&s->parallel, (const guint[]){ 3, 3, 2, 2 }, 4);
  /* The generated and recorded workloads are checked the same way, after they are built. */
  g_autofree char *gen =
    input_error("[device]\nmemory = 80GiB\nmatmul_tflops = 100\nhbm_bandwidth = 1TB/s\n"
                "[link]\nh2d_bandwidth = 50GB/s\nd2h_bandwidth = 50GB/s\n"
                "[transformer]\nhidden = 64\nlayers = 3\nheads = 4\nffn = 128\nvocab = 100\nbatch = 1\nseq = 16\n"
                        "[parallel]\npp = 4\n");
  assert_has(gen, "test.ini: [parallel] pp: ");
  assert_has(gen, "the model's 3 layers");
}
END_TEST

/* ---- bad input: [node] and stages ----------------------------------------- */

START_TEST(test_bad_node)
{
  g_autofree char *count = input_error(BASE8 "[parallel]\npp = 2\ndp = 2\n[node]\nsockets = 2\ngpu_sockets = 0, 1, 1\n");
  assert_has(count, "test.ini: [node] gpu_sockets: ");
  assert_has(count, "expected one socket per GPU, pp × dp = 4 of them, got 3");
  g_autofree char *range = input_error(BASE8 "[parallel]\npp = 2\n[node]\nsockets = 2\ngpu_sockets = 0, 2\n");
  assert_has(range, "test.ini: [node] gpu_sockets: ");
  assert_has(range, "GPU 1: socket 2 is out of range (sockets = 2, 0-1)");
  g_autofree char *single = input_error(BASE8 "[node]\ngpu_sockets = 1\n");
  assert_has(single, "GPU 0: socket 1 is out of range (sockets = 1, 0-0)");
  g_autofree char *word = input_error(BASE8 "[node]\ngpu_sockets = one\n");
  assert_has(word, "test.ini: [node] gpu_sockets: ");
  assert_has(word, "got 'one'");
  g_autofree char *sockets = input_error(BASE8 "[node]\nsockets = 0\n");
  assert_has(sockets, "test.ini: [node] sockets: ");
  assert_has(sockets, "from 1 to 256");
  g_autofree char *per = input_error(BASE8 "[node]\ngpus_per_switch = 0\n");
  assert_has(per, "test.ini: [node] gpus_per_switch: ");
  g_autofree char *bw = input_error(BASE8 "[node]\nswitch_bandwidth = -1GB/s\n");
  assert_has(bw, "test.ini: [node] switch_bandwidth: ");
  g_autofree char *bare = input_error(BASE8 "[node]\nhost_memory_bandwidth = 200\n");
  assert_has(bare, "test.ini: [node] host_memory_bandwidth: ");
  assert_has(bare, "or 0, got '200'");
  g_autofree char *unknown = input_error(BASE8 "[node]\nnvlink = 1\n");
  assert_has(unknown, "test.ini: [node] nvlink: unknown key (expected one of gpus_per_switch, switch_bandwidth, "
                      "sockets, host_memory_bandwidth, gpu_sockets, gpus, collective_bandwidth, "
                      "collective_latency, collective_slowdown, host_adam_gparams)");
}
END_TEST

/* [node]'s collective figures and [network]: the schema's defaults (an HGX
 * H100 node on 400 Gb/s InfiniBand) without the groups, every key read. */
START_TEST(test_collective_keys)
{
  g_autoptr(SimScenario) d = test_scenario_from_text(BASE8);
  const SimLink *l = &d->machine.link;
  ck_assert_uint_eq(l->node.gpus, 8);
  ck_assert_close(l->node.collective_bandwidth, 370e9, 1);
  ck_assert_close(l->node.collective_latency, 40e-6, 1e-15);
  ck_assert_close(l->node.collective_slowdown, 0.12, 1e-15);
  ck_assert_close(l->network.bandwidth, 50e9, 1);
  ck_assert_close(l->network.latency, 123e-6, 1e-15);

  g_autoptr(SimScenario) s =
    test_scenario_from_text(BASE8 "[node]\ngpus = 4\ngpus_per_switch = 2\ncollective_bandwidth = 234.89GB/s\n"
                                  "collective_latency = 43.83us\ncollective_slowdown = 0\n"
                                  "[network]\nbandwidth = 25GB/s\nlatency = 0\n");
  l = &s->machine.link;
  ck_assert_uint_eq(l->node.gpus, 4);
  ck_assert_close(l->node.collective_bandwidth, 234.89e9, 1);
  ck_assert_close(l->node.collective_latency, 43.83e-6, 1e-15);
  ck_assert_close(l->node.collective_slowdown, 0, 0);
  ck_assert_close(l->network.bandwidth, 25e9, 1);
  ck_assert_close(l->network.latency, 0, 0);
  /* One GPU per node (a GH200 superchip) and the most a node places. */
  g_autoptr(SimScenario) one = test_scenario_from_text(BASE8 "[node]\ngpus = 1\n");
  ck_assert_uint_eq(one->machine.link.node.gpus, 1);
  g_autoptr(SimScenario) most = test_scenario_from_text(BASE8 "[node]\ngpus = 256\ngpus_per_switch = 256\n");
  ck_assert_uint_eq(most->machine.link.node.gpus, 256);
}
END_TEST

START_TEST(test_bad_collective_keys)
{
  static const struct {
    const char *text, *where, *what;
  } cases[] = {
    { "[node]\ngpus = 0\n", "test.ini: [node] gpus: ", "from 1 to 256" },
    { "[node]\ngpus = 257\n", "test.ini: [node] gpus: ", "from 1 to 256" },
    { "[node]\ngpus = eight\n", "test.ini: [node] gpus: ", "got 'eight'" },
    { "[node]\ncollective_bandwidth = 0\n", "test.ini: [node] collective_bandwidth: ", "" },
    { "[node]\ncollective_bandwidth = -1GB/s\n", "test.ini: [node] collective_bandwidth: ", "" },
    { "[node]\ncollective_bandwidth = 370\n", "test.ini: [node] collective_bandwidth: ", "" },
    { "[node]\ncollective_latency = -1us\n", "test.ini: [node] collective_latency: ", "" },
    { "[node]\ncollective_latency = 40GB/s\n", "test.ini: [node] collective_latency: ", "" },
    { "[node]\ncollective_slowdown = 1\n", "test.ini: [node] collective_slowdown: ", "[0, 1)" },
    { "[node]\ncollective_slowdown = -0.1\n", "test.ini: [node] collective_slowdown: ", "[0, 1)" },
    { "[network]\nbandwidth = 0\n", "test.ini: [network] bandwidth: ", "" },
    { "[network]\nbandwidth = 50Gb\n", "test.ini: [network] bandwidth: ", "" },
    { "[network]\nlatency = -5us\n", "test.ini: [network] latency: ", "" },
    { "[network]\nlatency = fast\n", "test.ini: [network] latency: ", "got 'fast'" },
    { "[network]\nnics = 8\n", "test.ini: [network] nics: ",
      "unknown key (expected one of bandwidth, latency)" },
    /* A switch sits inside a node: gpus is a multiple of gpus_per_switch,
     * the message at gpus when the file gives it, else at gpus_per_switch. */
    { "[node]\ngpus = 6\ngpus_per_switch = 4\n", "test.ini: [node] gpus: ",
      "expected gpus to be a multiple of gpus_per_switch (a switch sits inside one node), got gpus = 6 and "
      "gpus_per_switch = 4" },
    { "[node]\ngpus_per_switch = 3\n", "test.ini: [node] gpus_per_switch: ", "got gpus = 8 and gpus_per_switch = 3" },
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *text = g_strconcat(BASE8, cases[i].text, NULL);
    g_autofree char *msg = input_error(text);
    assert_has(msg, cases[i].where);
    assert_has(msg, cases[i].what);
  }
}
END_TEST

START_TEST(test_bad_stages)
{
  g_autofree char *range = input_error(BASE8 "[parallel]\npp = 2\n[policy.x]\nkind = offload\nstages = 0,2\n");
  assert_has(range, "test.ini: [policy.x] stages: ");
  assert_has(range, "stage 2 is out of range (pp = 2, 0-1)");
  g_autofree char *single = input_error(BASE8 "[policy.x]\nkind = resident\nstages = 1\n");
  assert_has(single, "test.ini: [policy.x] stages: ");
  assert_has(single, "stage 1 is out of range (pp = 1, 0-0)");
  g_autofree char *word = input_error(BASE8 "[parallel]\npp = 2\n[policy.x]\nkind = checkpoint\nstages = first\n");
  assert_has(word, "test.ini: [policy.x] stages: ");
  assert_has(word, "expected all, none, first:N, last:N or stage indices");
  g_autofree char *first = input_error(BASE8 "[parallel]\npp = 2\n[policy.x]\nkind = offload\nstages = first:3\n");
  assert_has(first, "expected first:N with N from 0 to 2");
  g_autofree char *empty = input_error(BASE8 "[parallel]\npp = 2\n[policy.x]\nkind = offload\nstages =\n");
  assert_has(empty, "test.ini: [policy.x] stages: ");
  assert_has(empty, "got nothing");
  /* The layer messages read as they always have. */
  g_autofree char *layers = input_error(BASE8 "[policy.x]\nkind = offload\nlayers = 9\n");
  assert_has(layers, "layer 9 is out of range (the model has 8 layers, 0-7)");
}
END_TEST

/* Through the binary: exit status 2 and the message once, after "offsim: ". */
START_TEST(test_cli_exit_status)
{
  g_autofree char *dir = test_tmp_dir_new();
  g_autofree char *path = g_build_filename(dir, "pp.ini", NULL);
  ck_assert(g_file_set_contents(path, BASE8 "[parallel]\npp = 2\nsplit = 8, 0\n", -1, NULL));
  g_auto(TestRun) run = test_offsim("compare", path, NULL);
  ck_assert_int_eq(run.status, 2);
  assert_has(run.err, "offsim: ");
  assert_has(run.err, "pp.ini: [parallel] split: chunk 1: expected at least 1 layer, got 0 (a stage with no layers)");

  g_autofree char *zero = g_build_filename(dir, "zero.ini", NULL);
  ck_assert(g_file_set_contents(zero, BASE8 "[parallel]\nsharding = gradients\n", -1, NULL));
  g_auto(TestRun) sharded = test_offsim("run", zero, NULL);
  ck_assert_int_eq(sharded.status, 2);
  assert_has(sharded.err, "zero.ini: [parallel] sharding: expected none with dp = 1");
}
END_TEST

static Suite *
parallel_input_suite(void)
{
  Suite *suite = suite_create("parallel input");
  TCase *valid = tcase_create("valid");
  tcase_add_test(valid, test_defaults_without_the_groups);
  tcase_add_test(valid, test_struct_defaults_are_the_loaded_values);
  tcase_add_test(valid, test_parallel_keys);
  tcase_add_test(valid, test_split);
  tcase_add_test(valid, test_node_keys);
  tcase_add_test(valid, test_node_default_sockets);
  tcase_add_test(valid, test_stages);
  tcase_add_test(valid, test_collective_keys);
  suite_add_tcase(suite, valid);
  TCase *bad = tcase_create("bad input");
  tcase_add_test(bad, test_bad_counts);
  tcase_add_test(bad, test_bad_sharding);
  tcase_add_test(bad, test_virtual_needs_interleaved);
  tcase_add_test(bad, test_interleaved_microbatches);
  tcase_add_test(bad, test_too_many_gpus);
  tcase_add_test(bad, test_bad_split);
  tcase_add_test(bad, test_chunks_without_layers);
  tcase_add_test(bad, test_virtual_does_not_divide);
  tcase_add_test(bad, test_bad_node);
  tcase_add_test(bad, test_bad_stages);
  tcase_add_test(bad, test_bad_collective_keys);
  tcase_add_test(bad, test_cli_exit_status);
  suite_add_tcase(suite, bad);
  return suite;
}

int
main(void)
{
  return test_run_suite(parallel_input_suite());
}
