#include "error.h"

G_DEFINE_QUARK(offsim-error-quark, sim_error)

int
sim_error_exit_code(const GError *error)
{
  if (error == NULL || error->domain != SIM_ERROR)
    return 1;
  switch ((SimErrorCode)error->code) {
  case SIM_ERROR_INPUT:
    return 2;
  case SIM_ERROR_TOOL:
    return 3;
  case SIM_ERROR_INTERNAL:
  default:
    return 1;
  }
}
