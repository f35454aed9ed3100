/* meaning.h: what filesink writes beside the data so that a file explains
 * itself to someone who did not make it: the time reference, the frequency
 * of every channel held, the inputs and baselines by label, and the stages
 * (and their parameters) that made the data. README.md lists the names.
 * Callers hold filesink's HDF5 lock. */
#ifndef CBF_FILESINK_MEANING_H
#define CBF_FILESINK_MEANING_H

#include <cbf/cbf.h>
#include <hdf5.h>

/* Input labels from filesink's `input_labels` parameter: one per input,
 * input 2 x antenna + pol; inputs past the list get ant<a>p<pol>. */
typedef struct fs_labels {
    char *text;       /* the parameter's copy, cut at the commas */
    const char **name;
    int n;
} fs_labels;

/* Parses "a, b, c" (empty: none). Returns 0 or CBF_ENOMEM. */
int fs_labels_parse(fs_labels *l, const char *text, cbf_error *err);
void fs_labels_free(fs_labels *l);

/* Bits of one real component as the producer made it (CI4: 4 though the
 * file holds int8 pairs; packed: the descriptor's sample width). */
int fs_bits_of(const cbf_port_desc *d);

/* Time, frequency, input and baseline attributes and datasets of one
 * group (from its descriptor and the labels), and `upstream`: every node
 * the data passed through. Returns 0 or -1 (an HDF5 call failed). */
int fs_meaning_write(hid_t group, const cbf_port_desc *d, cbf_node *producer,
                     const fs_labels *labels);

#endif
