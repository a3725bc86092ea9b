#define _GNU_SOURCE

#include "gpu_calib/calib_probe.h"

#include "gpu_calib/calib_report.h"

#include <math.h>
#include <sched.h>
#include <string.h>

static char *
read_sysfs(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return NULL;
  return g_strstrip(text);
}

/* "32.0 GT/s PCIe" -> 5. */
static int
pcie_generation(const char *speed)
{
  static const double rates[] = { 2.5, 5, 8, 16, 32, 64, 128 };
  if (speed == NULL)
    return 0;
  double gt = g_ascii_strtod(speed, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(rates); i++)
    if (fabs(gt - rates[i]) < 0.1)
      return (int)i + 1;
  return 0;
}

char *
calib_probe_pcie_link(const char *pci_bus, const char *speed_file, const char *width_file)
{
  if (pci_bus == NULL)
    return g_strdup("unknown (no PCI bus id)");
  g_autofree char *dir = g_build_filename("/sys/bus/pci/devices", pci_bus, NULL);
  g_autofree char *speed = read_sysfs(dir, speed_file);
  g_autofree char *width = read_sysfs(dir, width_file);
  if (speed == NULL || width == NULL)
    return g_strdup("not reported (no sysfs entry)");
  int gen = pcie_generation(speed);
  return gen ? g_strdup_printf("Gen%d x%s (%s)", gen, width, speed) : g_strdup_printf("x%s (%s)", width, speed);
}

/* Pins this thread, and the threads it starts, to the CPUs of the GPU's
 * NUMA node: pinned memory is then allocated on that node.  Returns what it
 * did, for the record. */
static char *
bind_to_gpu_node(const char *pci_bus)
{
  if (pci_bus == NULL)
    return g_strdup("not set (no PCI bus id)");
  g_autofree char *dir = g_build_filename("/sys/bus/pci/devices", pci_bus, NULL);
  g_autofree char *node = read_sysfs(dir, "numa_node");
  g_autofree char *cpus = read_sysfs(dir, "local_cpulist");
  if (node == NULL || cpus == NULL || strcmp(node, "-1") == 0)
    return g_strdup_printf("not set (NUMA node %s)", node ? node : "unknown");
  cpu_set_t set;
  CPU_ZERO(&set);
  g_auto(GStrv) ranges = g_strsplit(cpus, ",", -1);
  for (char **r = ranges; *r; r++) {
    guint64 lo = 0, hi = 0;
    g_auto(GStrv) ends = g_strsplit(*r, "-", 2);
    if (!g_ascii_string_to_unsigned(ends[0], 10, 0, CPU_SETSIZE - 1, &lo, NULL))
      return g_strdup_printf("not set (cannot read local_cpulist '%s')", cpus);
    hi = lo;
    if (ends[1] && !g_ascii_string_to_unsigned(ends[1], 10, lo, CPU_SETSIZE - 1, &hi, NULL))
      return g_strdup_printf("not set (cannot read local_cpulist '%s')", cpus);
    for (guint64 cpu = lo; cpu <= hi; cpu++)
      CPU_SET((int)cpu, &set);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    return g_strdup_printf("not set (sched_setaffinity failed for CPUs %s)", cpus);
  return g_strdup_printf("NUMA node %s, CPUs %s", node, cpus);
}

static char *
driver_version(void)
{
  char *text = NULL;
  if (g_file_get_contents("/sys/module/nvidia/version", &text, NULL, NULL))
    return g_strstrip(text);
  int v = 0;
  CUDA_CHECK(cudaDriverGetVersion(&v));
  return g_strdup_printf("unknown (driver API %d.%d)", v / 1000, v % 1000 / 10);
}

int
calib_probe_select_device(int wanted)
{
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    calib_report_die(3,
                     "no CUDA device: cudaGetDeviceCount: %s (%s); run offsim-calib on a machine with an NVIDIA GPU "
                     "and its driver",
                     e == cudaSuccess ? "no device" : cudaGetErrorString(e),
                     e == cudaSuccess ? "count 0" : cudaGetErrorName(e));
  if (wanted < 0 || wanted >= count)
    calib_report_die(2, "--device %d: this machine has %d CUDA device%s (0 to %d)", wanted, count,
                     count == 1 ? "" : "s", count - 1);
  CUDA_CHECK(cudaSetDevice(wanted));
  return count;
}

void
calib_probe_machine(CalibProbe *p, int device)
{
  CUDA_CHECK(cudaGetDeviceProperties(&p->prop, device));
  char bus[32] = "";
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  p->bus = g_ascii_strdown(bus, -1);
  p->affinity = bind_to_gpu_node(p->bus);
  p->driver = driver_version();
  p->pcie_max = calib_probe_pcie_link(p->bus, "max_link_speed", "max_link_width");
  CUDA_CHECK(cudaRuntimeGetVersion(&p->runtime));
  CUDA_CHECK(cudaDriverGetVersion(&p->driver_api));
}

void
calib_probe_clear(CalibProbe *p)
{
  g_free(p->bus);
  g_free(p->affinity);
  g_free(p->driver);
  g_free(p->pcie_max);
}
