/* The expected output of the printf_formats kernel (printf.cu) for the inputs below,
   made by the host C library: gcc printf_host.c -o printf_host && ./printf_host.
   The inputs are those of tests/hardware/test_simt_gallery.py (doubles given by their
   bits); the rows come in the order a warp prints them: each printf for every thread. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "printf_formats.h"

#define N 12
static const int IV[N] = {0, 1, -1, 7, 255, -255, 65537, 2147483647, -2147483647 - 1,
                          1000, -42, 4096};
static const long long LV[N] = {0LL, 1LL, -1LL, 9007199254740993LL,
                                -9223372036854775807LL - 1, 9223372036854775807LL,
                                4294967296LL, -4294967297LL, 123456789012LL, -5LL, 77LL,
                                1LL << 40};
static const unsigned long long DBITS[N] = {
    0x0000000000000000ULL, 0x8000000000000000ULL, 0x3FF8000000000000ULL,
    0xC002000000000000ULL, 0x3FB999999999999AULL, 0x7FF0000000000000ULL,
    0xFFF0000000000000ULL, 0x7FF8000000000000ULL, 0xFFF8000000000000ULL,
    0x0000000000000001ULL, 0x7E37E43C8800759CULL, 0x3FC0000000000000ULL};
static const unsigned int FBITS[N] = {
    0x3F800000U, 0xBF000000U, 0x3EAAAAABU, 0x4B000001U, 0x00000001U, 0x7F7FFFFFU,
    0x3DCCCCCDU, 0xC2F6E979U, 0x3F000000U, 0x40490FDBU, 0x80000000U, 0x447A0000U};

int main(void)
{
    double dv[N];
    float fv[N];
    memcpy(dv, DBITS, sizeof dv);
    memcpy(fv, FBITS, sizeof fv);
    for (int i = 0; i < N; ++i) PRINTF_ROW_INT(i, IV[i], LV[i]);
    for (int i = 0; i < N; ++i) PRINTF_ROW_LONG(i, IV[i], LV[i]);
    for (int i = 0; i < N; ++i) PRINTF_ROW_FLOAT(i, dv[i], (double)fv[i]);
    return 0;
}
