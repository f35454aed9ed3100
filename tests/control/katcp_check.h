/* katcp_check.h: the property both the unit test and the libFuzzer harness
 * hold the katcp line code to. */
#ifndef CBF_TEST_KATCP_CHECK_H
#define CBF_TEST_KATCP_CHECK_H
#include <stddef.h>

/* Parses line; when it parses, writes the message back (escaping every
 * argument) and parses that again: the same type, name, id and arguments,
 * byte for byte, or a failure. 0: held (a malformed line held too: it was
 * refused with a message); -1 with *why. */
int katcp_check_line(const char *line, size_t len, const char **why);
#endif
