// The printf calls of printf.cu, shared with printf_host.c, which makes the expected
// output with the host C library (glibc): every conversion CUDA's printf documents, with
// flags, widths, precisions (also given by '*') and length modifiers.
#define PRINTF_ROW_INT(i, a, b)                                                          \
    printf("%d: %d|%5i|%-5d|%+d|% d|%05d|%.3d|%.0d|%u|%x|%X|%#x|%o|%#o|%c|%hd|%hhu\n",      \
           i, a, a, a, a, a, a, a, a, a, a, a, a, a, a, 'A' + (i % 26), a, a)
#define PRINTF_ROW_LONG(i, a, b)                                                         \
    printf("%d: %ld|%lld|%lu|%llu|%llx|%-22lld|%+.20lld|%s|%-6s|%.2s|%*d|%-*d|%%\n",         \
           i, (long)b, b, (unsigned long)b, (unsigned long long)b, b, b, b,                     \
           (i % 3 == 0) ? "alpha" : ((i % 3 == 1) ? "" : "beta gamma"),                   \
           (i & 1) ? "odd" : "even", "xyz", i - 4, a, i - 4, a)
#define PRINTF_ROW_FLOAT(i, d, f)                                                        \
    printf("%d: %f|%e|%E|%g|%G|%.0f|%#.0f|%10.3e|%-12g|%+.4g|%012.5f|%.10g|%F|% e|%.*f\n", \
           i, d, d, d, d, d, d, d, d, d, d, d, d, d, d, i % 5, f)
