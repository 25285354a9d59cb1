/* What the other files of the double use of module.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_MODULE_H
#define SLUICE_DOUBLE_MODULE_H

#include "core.h"

void image_free(struct dbl_image *img);

#endif
