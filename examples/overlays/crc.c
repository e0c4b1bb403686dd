/* crc.c — overlay "crc" (region 1): CRC-16/CCITT-FALSE, bit by bit. */
#include "examples/overlays/overlays.h"

uint32_t crc16_bitwise(const uint8_t *bytes, size_t len)
{
    uint32_t crc = 0xffff;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint32_t)bytes[i] << 8;
        for (int bit = 0; bit < 8; bit++)
            crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff
                               : (crc << 1) & 0xffff;
    }
    return crc;
}
