/* h5util.c: see h5util.h. */
#include "h5util.h"

#include <stdlib.h>
#include <string.h>

hid_t h5u_create_rows(hid_t loc, const char *name, hid_t type, int row_rank,
                      const hsize_t *row)
{
    hsize_t dims[H5U_MAX_RANK], maxdims[H5U_MAX_RANK], chunk[H5U_MAX_RANK];
    const int rank = row_rank + 1;
    if (rank > H5U_MAX_RANK)
        return -1;
    dims[0] = 0;
    maxdims[0] = H5S_UNLIMITED;
    chunk[0] = 1;
    size_t bytes = H5Tget_size(type);
    for (int i = 0; i < row_rank; i++) {
        dims[i + 1] = maxdims[i + 1] = chunk[i + 1] = row[i] ? row[i] : 1;
        bytes *= (size_t)chunk[i + 1];
    }
    /* HDF5 caps a chunk at 4 GiB; big chunks also defeat partial reads. */
    for (int i = 1; i < rank && bytes > ((size_t)256 << 20); i++)
        while (chunk[i] > 1 && bytes > ((size_t)256 << 20)) {
            bytes /= (size_t)chunk[i];
            chunk[i] = (chunk[i] + 1) / 2;
            bytes *= (size_t)chunk[i];
        }
    hid_t space = H5Screate_simple(rank, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = -1;
    if (space >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, rank, chunk) >= 0)
        ds = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return ds;
}

int h5u_append(hid_t ds, hid_t type, int row_rank, const hsize_t *row, hsize_t n,
               const void *data)
{
    hsize_t size[H5U_MAX_RANK], start[H5U_MAX_RANK], count[H5U_MAX_RANK];
    const int rank = row_rank + 1;
    size[0] = n + 1;
    start[0] = n;
    count[0] = 1;
    for (int i = 0; i < row_rank; i++) {
        size[i + 1] = count[i + 1] = row[i] ? row[i] : 1;
        start[i + 1] = 0;
    }
    if (H5Dset_extent(ds, size) < 0)
        return -1;
    hid_t fspace = H5Dget_space(ds);
    hid_t mspace = H5Screate_simple(rank, count, NULL);
    int rc = -1;
    if (fspace >= 0 && mspace >= 0 &&
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
        H5Dwrite(ds, type, mspace, fspace, H5P_DEFAULT, data) >= 0)
        rc = 0;
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    return rc;
}

static int h5u_attr_write(hid_t loc, const char *name, hid_t type, hid_t space, const void *v)
{
    int rc = -1;
    if (space >= 0) {
        hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            rc = H5Awrite(a, type, v) < 0 ? -1 : 0;
            H5Aclose(a);
        }
        H5Sclose(space);
    }
    return rc;
}

int h5u_attr_strings(hid_t loc, const char *name, const char *const *values, size_t n)
{
    /* Fixed-length strings of the longest value: what h5py reads as bytes
     * and every HDF5 tool prints plainly. */
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        if (strlen(values[i]) + 1 > len)
            len = strlen(values[i]) + 1;
    char buf[H5U_MAX_RANK * 64];
    char *flat = n * len <= sizeof buf ? buf : NULL;
    if (!flat)
        return -1;
    memset(flat, 0, n * len);
    for (size_t i = 0; i < n; i++)
        memcpy(flat + i * len, values[i], strlen(values[i]));
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, len);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    hsize_t dim = n;
    int rc = h5u_attr_write(loc, name, type, H5Screate_simple(1, &dim, NULL), flat);
    H5Tclose(type);
    return rc;
}

int h5u_attr_string(hid_t loc, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    int rc = h5u_attr_write(loc, name, type, H5Screate(H5S_SCALAR), value);
    H5Tclose(type);
    return rc;
}

int h5u_attr_double(hid_t loc, const char *name, double value)
{
    return h5u_attr_write(loc, name, H5T_NATIVE_DOUBLE, H5Screate(H5S_SCALAR), &value);
}

int h5u_attr_i64(hid_t loc, const char *name, long long value)
{
    return h5u_attr_write(loc, name, H5T_NATIVE_LLONG, H5Screate(H5S_SCALAR), &value);
}

int h5u_write_strings(hid_t loc, const char *name, int rank, const hsize_t *dims,
                      const char *const *values)
{
    size_t n = 1, len = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    for (size_t i = 0; i < n; i++)
        if (strlen(values[i]) + 1 > len)
            len = strlen(values[i]) + 1;
    char *flat = calloc(n ? n : 1, len);
    if (!flat)
        return -1;
    for (size_t i = 0; i < n; i++)
        memcpy(flat + i * len, values[i], strlen(values[i]));
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, len);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    int rc = h5u_write_array(loc, name, type, rank, dims, flat);
    H5Tclose(type);
    free(flat);
    return rc;
}

int h5u_write_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                    const void *data)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t ds = space >= 0 ? H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT,
                                       H5P_DEFAULT) : -1;
    int rc = ds >= 0 && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 ? 0 : -1;
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}
