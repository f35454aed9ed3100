/* h5util.h: the few HDF5 patterns filesink repeats (extendible datasets
 * grown one row per buffer, string and number attributes). Not thread-safe:
 * HDF5 is usually built without its global lock, so callers serialise. */
#ifndef CBF_FILESINK_H5UTIL_H
#define CBF_FILESINK_H5UTIL_H

#include <hdf5.h>
#include <stddef.h>

#define H5U_MAX_RANK 9

/* An extendible dataset of rows of shape row[0..row_rank): file shape
 * [0, row...] growing along axis 0, chunked one row per chunk (split along
 * the next axes while a chunk would exceed 256 MiB). Returns < 0 on error. */
hid_t h5u_create_rows(hid_t loc, const char *name, hid_t type, int row_rank,
                      const hsize_t *row);
/* Appends row number n (0-based) from host memory. Returns 0 or -1. */
int h5u_append(hid_t ds, hid_t type, int row_rank, const hsize_t *row, hsize_t n,
               const void *data);

int h5u_attr_string(hid_t loc, const char *name, const char *value);
int h5u_attr_strings(hid_t loc, const char *name, const char *const *values, size_t n);
int h5u_attr_double(hid_t loc, const char *name, double value);
int h5u_attr_i64(hid_t loc, const char *name, long long value);

/* A fixed-size dataset written at once: values in C order, dims[rank].
 * Fixed-length strings (of the longest value) for the string form, which
 * h5py reads as bytes. Datasets rather than attributes because a list of
 * baselines outgrows HDF5's 64 KiB attribute limit. Return 0 or -1. */
int h5u_write_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                    const void *data);
int h5u_write_strings(hid_t loc, const char *name, int rank, const hsize_t *dims,
                      const char *const *values);

#endif
