/* SHA-256 (FIPS 180-4), one-shot over a buffer in memory (flash or RAM). */
#include "snapuq_sha256.h"

static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32u - (n))))

static void block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, k, t1, t2;
    unsigned i;
    for (i = 0; i < 16u; i++) {
        w[i] = ((uint32_t)p[4u * i] << 24) | ((uint32_t)p[4u * i + 1u] << 16) | ((uint32_t)p[4u * i + 2u] << 8) |
               (uint32_t)p[4u * i + 3u];
    }
    for (i = 16; i < 64u; i++) {
        uint32_t s0 = ROR(w[i - 15u], 7u) ^ ROR(w[i - 15u], 18u) ^ (w[i - 15u] >> 3);
        uint32_t s1 = ROR(w[i - 2u], 17u) ^ ROR(w[i - 2u], 19u) ^ (w[i - 2u] >> 10);
        w[i] = w[i - 16u] + s0 + w[i - 7u] + s1;
    }
    a = h[0];
    b = h[1];
    c = h[2];
    d = h[3];
    e = h[4];
    f = h[5];
    g = h[6];
    k = h[7];
    for (i = 0; i < 64u; i++) {
        t1 = k + (ROR(e, 6u) ^ ROR(e, 11u) ^ ROR(e, 25u)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        t2 = (ROR(a, 2u) ^ ROR(a, 13u) ^ ROR(a, 22u)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void snapuq_sha256_hex(const uint8_t *data, size_t len, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    uint32_t h[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                     0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    uint8_t tail[128];
    size_t full = len & ~(size_t)63u, rest = len - full, i, n;
    uint64_t bits = (uint64_t)len * 8u;
    for (i = 0; i < full; i += 64u) {
        block(h, data + i);
    }
    for (i = 0; i < rest; i++) {
        tail[i] = data[full + i];
    }
    tail[rest] = 0x80u;
    n = (rest < 56u) ? 64u : 128u;
    for (i = rest + 1u; i < n - 8u; i++) {
        tail[i] = 0u;
    }
    for (i = 0; i < 8u; i++) {
        tail[n - 1u - i] = (uint8_t)(bits >> (8u * i));
    }
    block(h, tail);
    if (n == 128u) {
        block(h, tail + 64);
    }
    for (i = 0; i < 32u; i++) {
        uint8_t byte = (uint8_t)(h[i / 4u] >> (24u - 8u * (i % 4u)));
        hex[2u * i] = digits[byte >> 4];
        hex[2u * i + 1u] = digits[byte & 0xFu];
    }
    hex[64] = '\0';
}
