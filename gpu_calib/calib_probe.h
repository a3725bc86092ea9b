/* gpu_calib/calib_probe.h — the machine around the GPU: the device, its
 * driver, its PCIe link and its NUMA node, from the CUDA runtime and sysfs.
 *
 * The module reads and never measures: sysfs files under
 * /sys/bus/pci/devices/BUS and /sys/module/nvidia, and the runtime's
 * properties and versions.  What sysfs does not say is recorded as such
 * ("not reported (no sysfs entry)", "unknown (...)") rather than failing:
 * a container or a VM may hide any of it.  The one thing it changes is the
 * process's CPU affinity, pinned to the CPUs of the GPU's NUMA node so that
 * pinned memory allocated afterwards lives on that node.
 *
 * Ownership: a CalibProbe owns its strings (bus, affinity, driver,
 * pcie_max); calib_probe_clear frees them.  calib_probe_pcie_link returns
 * a newly allocated string that the caller frees with g_free.  CUDA errors
 * and a missing or wrong device end the program (calib_report.h).
 */
#pragma once

#include <cuda_runtime.h>
#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  struct cudaDeviceProp prop;
  char *bus;      /* PCI bus id, lower case as sysfs names it */
  char *affinity; /* what the NUMA binding did, for the record */
  char *driver;   /* the kernel module's version, or why it is unknown */
  char *pcie_max; /* the link's maximum: "Gen5 x16 (32.0 GT/s PCIe)" */
  int runtime, driver_api; /* CUDA versions, 1000 * major + 10 * minor */
} CalibProbe;

/* Makes `wanted` the current device and returns how many there are; exits
 * 3 without a device, 2 when `wanted` is not one of them. */
int calib_probe_select_device(int wanted);

/* Fills `p` for `device` (the current one) and binds this thread, and the
 * threads it starts, to the CPUs of the device's NUMA node. */
void calib_probe_machine(CalibProbe *p, int device);

/* Frees the strings of `p`. */
void calib_probe_clear(CalibProbe *p);

/* The PCIe link of `pci_bus` (NULL: unknown) as sysfs reports it in the
 * two files named, such as "max_link_speed" and "max_link_width". */
char *calib_probe_pcie_link(const char *pci_bus, const char *speed_file, const char *width_file);

G_END_DECLS
