/* fuzz_target.h: one input through every parser of the codec (and the
 * Ethernet/IPv4/UDP frame parser of net/eth), checking what
 * a parser promises about what it accepted. Shared by the libFuzzer harness
 * (fuzz_packet.c) and the always-run mutation test (test_mutation.c).
 * Returns 0, or -1 with *why set when a promise is broken. */
#ifndef CBF_FUZZ_TARGET_H
#define CBF_FUZZ_TARGET_H
#include <stddef.h>
#include <stdint.h>
#include "spead.h"

int spead_fuzz_one(cbf_spead_assembler *a, const uint8_t *data, size_t len, const char **why);
/* An assembler whose callback reads every byte of every heap it gets. */
int spead_fuzz_assembler(cbf_spead_assembler **out);
#endif
