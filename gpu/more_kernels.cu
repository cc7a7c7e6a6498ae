/* more_kernels.cu: placeholder, being written. */
#include <cuda_runtime.h>
