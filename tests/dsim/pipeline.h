/* pipeline.h: run the built cbf-run on a YAML text and read HDF5 back,
 * for the pipeline tests (dsim, filesink, ddc, xeng, beamform). */
#ifndef CBF_TEST_PIPELINE_H
#define CBF_TEST_PIPELINE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* Path of the built cbf-run, or NULL (then the caller skips with 77). */
const char *pl_cbf_run(void);
/* For a test's main: 0, or 77 (skip) after saying why when cbf-run is not
 * built; also turns off HDF5's own error printing. */
int pl_setup(void);
/* A fresh temporary folder (removed by the OS's tmp cleaning; small). */
const char *pl_tmpdir(void);
/* Writes yaml to <tmpdir>/<name>.yaml, runs cbf-run on it with stderr in
 * <tmpdir>/<name>.log; returns cbf-run's exit status. */
int pl_run(const char *name, const char *yaml);
/* pl_run, then the HDF5 file it wrote, opened read-only: its id, or -1
 * after printing the run's log when cbf-run failed (or -1 when the file
 * does not open). */
hid_t pl_run_open(const char *name, const char *yaml, const char *h5);
/* The log of the last run of that name, read into a static buffer. */
const char *pl_log(const char *name);
/* From cbf-run's table at exit in `table`: the value of counter `name` on
 * node `node`'s row, or column `col` of that row (0 = the node's name);
 * -1 when absent. */
long long pl_table_value(const char *table, const char *node, const char *name);
long long pl_table_column(const char *table, const char *node, int col);

/* Reads a whole dataset as memtype into a malloc'd block; fills rank and
 * dims (up to 8). NULL if it is not there. */
void *pl_read(hid_t file, const char *path, hid_t memtype, int *rank, hsize_t *dims);
/* A fixed-length string attribute (scalar, or element i of an array). */
int pl_attr_string(hid_t loc, const char *obj, const char *name, size_t i, char *out,
                   size_t outlen);
int pl_attr_double(hid_t loc, const char *obj, const char *name, double *out);

#endif
