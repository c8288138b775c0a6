/* SHA-256 (FIPS 180-4) of a buffer, for the firmware to report the model it runs (`profile`
 * model_sha256=...), which the harness compares with the host's model. C99, no allocation. */
#ifndef SNAPUQ_SHA256_H
#define SNAPUQ_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Writes the digest of data[0..len) as 64 lower-case hex characters + NUL into hex[65]. */
void snapuq_sha256_hex(const uint8_t *data, size_t len, char hex[65]);

#endif
