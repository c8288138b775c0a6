/*
 * snapuq_quant.h - integer-only derivation of TFLite's requantization multipliers (internal).
 *
 * TFLite computes multipliers in double precision on the host (QuantizeMultiplier of a double
 * ratio of float32 scales). These functions reproduce those results bit-exactly with integer
 * arithmetic only, so the MCU never executes a float or double operation for them.
 */
#ifndef SNAPUQ_QUANT_H
#define SNAPUQ_QUANT_H

#include <stdint.h>

/* Decompose a positive normal float32: value = mant * 2^exp, mant in [2^23, 2^24).
 * Returns -1 for negative, zero, denormal, inf and NaN. */
int snapuq_f32_decompose(float f, uint32_t *mant, int32_t *exp);

/* TFLite QuantizeMultiplier of the double (num_mant * 2^num_exp) / (den_mant * 2^den_exp),
 * the double being the correctly rounded quotient (53 bits), then frexp + round(q * 2^31).
 * clamp_max: cap the double at 2^31 - 1 first (softmax's QuantizeMultiplierGreaterThanOne). */
void snapuq_quantize_ratio(uint64_t num_mant, int32_t num_exp, uint64_t den_mant, int32_t den_exp,
                           int clamp_max, int32_t *mult, int32_t *shift);

/* QuantizeMultiplier(double(a) * double(b) / double(c)) (conv / fc effective scale).
 * Returns -1 for a scale that is not a positive normal float or a shift above 30. */
int snapuq_qm_product_ratio(float a, float b, float c, int32_t *mult, int32_t *shift);

/* QuantizeMultiplier(double(a) / double(c) * 2^p); -1 as above. */
int snapuq_qm_ratio_pot(float a, float c, int32_t p, int32_t *mult, int32_t *shift);

/* zero_point + round_half_away(float32(f / scale)) for small integer f (activation ranges). */
int32_t snapuq_quantize_int(int32_t f, float scale, int32_t zero_point);

#endif /* SNAPUQ_QUANT_H */
