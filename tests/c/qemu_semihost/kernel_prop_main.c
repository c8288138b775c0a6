/* semihosting entry of tests/c/kernel_prop.c on QEMU (case count and seed fixed at build time) */
#include <stdint.h>

#ifndef KP_CASES
#define KP_CASES 1500
#endif
#ifndef KP_SEED
#define KP_SEED 1
#endif

int kernel_prop_main(int32_t cases, uint32_t seed);
int semihost_main(void);

int semihost_main(void)
{
    return kernel_prop_main(KP_CASES, KP_SEED);
}
