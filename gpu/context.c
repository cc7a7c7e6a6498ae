/* context.c: placeholder, being written. */
#include "context.h"
