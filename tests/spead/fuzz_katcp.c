/* libFuzzer harness for the katcp line parser and writer (core/src/katcp/katcp_line.c):
 * any bytes as one line; whatever parses must write back and parse to the
 * same message (tests/control/katcp_check.c), and nothing may read or write
 * out of bounds (the sanitizers). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "katcp_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    if (katcp_check_line((const char *)data, size, &why)) {
        fprintf(stderr, "katcp line check failed: %s\n", why);
        abort();
    }
    return 0;
}
