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

#endif
