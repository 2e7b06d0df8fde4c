/* quant.h — helpers of the quantized block layouts (quant.c describes them) shared by the
 * reference dequantizer and the CPU kernels, so every one unpacks the K-type scales alike. */
#ifndef DB_QUANT_H
#define DB_QUANT_H

#include <stdint.h>

/* the 6-bit scale *s and min *m of sub-block j (0..7) of a Q4_K / Q5_K block's 12 bytes sc */
static inline void db_scale_min_k4(int j, const uint8_t *sc, int *s, int *m)
{
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

/* the 16 levels of the non-linear 4-bit types IQ4_NL / IQ4_XS (quant.c), as int8 */
static const int8_t db_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

/* the 6-bit scale (0..63, before the -32) of sub-block j (0..15) of a Q3_K block's 12 bytes sc */
static inline int db_scale_q3_k(int j, const uint8_t *sc)
{
    int k = j & 3, lo = j < 8 ? sc[(j & 4) + k] & 0xF : sc[(j & 4) + k] >> 4;
    return lo | (sc[8 + k] >> (2 * (j >> 2)) & 3) << 4;
}

/* the 6-bit scale (0..63, before the -32) of sub-block j (0..7) of an IQ4_XS block: u16 sh (the
 * high bits), 4 bytes sl (the low nibbles) */
static inline int db_scale_iq4_xs(int j, unsigned sh, const uint8_t *sl)
{
    return (sl[j >> 1] >> (4 * (j & 1)) & 0xF) | (int)(sh >> (2 * j) & 3) << 4;
}

#endif
