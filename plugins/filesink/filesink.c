/* filesink: writes every buffer arriving on its inputs to one HDF5 file.
 *
 * Each input edge becomes a group named after the producing node, holding
 * `data` (one row per buffer along axis 0, complex values as a trailing
 * axis of 2, packed samples as bytes) and the per-buffer side datasets
 * timestamp, seq, present, saturated, missing and aux. The descriptor and
 * the producer's parameters are attributes, so a file explains itself.
 * See README.md for the layout. */
#include <cbf/cbf.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "h5util.h"
#include "meaning.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/common.h"

static const cbf_param_decl filesink_params[] = {
    {.name = "path", .type = CBF_PARAM_STRING,
     .doc = "HDF5 file to write; missing parent folders are created"},
    {.name = "overwrite", .type = CBF_PARAM_BOOL, .def = "false",
     .doc = "replace an existing file (otherwise an existing file is an error)"},
    {.name = "max_buffers", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 9.2e18,
     .doc = "buffers to write per input, later ones are received and dropped; 0 = all"},
    {.name = "capture", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "write from the start; false: wait for a `capture` request (action start)"},
    {.name = "fsync", .type = CBF_PARAM_BOOL, .def = "false",
     .doc = "also fsync(2) the file after each buffer, so a power loss loses only the buffer "
            "being written (a SIGKILL loses only that one either way)"},
    {.name = "input_labels", .type = CBF_PARAM_STRING, .def = "",
     .doc = "names of the inputs, comma separated, input 2 x antenna + pol (e.g. \"m000v, "
            "m000h\"); inputs not named are ant<a>p<pol>"},
};

static const cbf_param_decl filesink_capture_args[] = {
    {.name = "action", .type = CBF_PARAM_CHOICE, .choices = "start|stop",
     .doc = "start or stop writing"},
    {.name = "input", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1, .max = 1023,
     .doc = "which input (edge, in YAML order); -1: all"},
};

static const cbf_request_decl filesink_requests[] = {
    {.name = "capture", .args = filesink_capture_args,
     .n_args = CBF_COUNT_OF(filesink_capture_args),
     .doc = "start or stop writing, from the next buffer on; buffers meanwhile are received and "
            "dropped"},
};

/* "*": a generic sink takes any stream. */
static const cbf_port_decl filesink_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "*", .multi = 1,
     .doc = "any buffers; one HDF5 group per edge"},
};

/* HDF5 is usually built without thread safety: every call from any
 * filesink node in the process goes through this lock. */
static pthread_mutex_t filesink_h5_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct input {
    cbf_node *node;
    int index;            /* in the `in` port's edges */
    cbf_port *port;
    cbf_port_desc desc;
    char group_name[256];
    hid_t group, data, ts, seq, present, saturated, missing, aux;
    hid_t type;           /* memory and file type of one scalar of data */
    int row_rank;
    hsize_t row[CBF_MAX_DIMS + 1];
    size_t payload;       /* bytes of a buffer's payload */
    int expand_ci4;
    uint8_t *host;        /* staging: device copies and CI4 expansion */
    bool is_beam;         /* a beam stream: dataset beam_ants, one word per heap */
    cbf_beam_batch beam;
    hid_t beam_ants;
    hsize_t beam_row[3];
    uint32_t *beam_words;
    uint64_t max, written, dropped, missing_total;
    atomic_bool capturing; /* set by `capture` requests, read between buffers */
    pthread_t thread;
    int threaded;         /* thread was started and must be joined */
    int rc;
    cbf_error err;
} input;

typedef struct filesink {
    char *path;
    char *partial;        /* where the file is made; renamed to path when the engine runs */
    hid_t file;
    int fd;               /* HDF5's descriptor of the file: space reserved, fsync */
    bool fsync;
    int n;
    input *in;
    cbf_counter *c_written, *c_dropped;
    atomic_bool failed;   /* an input could not write: every input stops */
    bool created, ran;    /* the file is this run's; run() was called */
    fs_labels labels;
} filesink;

static hid_t filesink_type_of(cbf_dtype t, int *complex)
{
    *complex = t == CBF_DTYPE_CI4 || t == CBF_DTYPE_CI8 || t == CBF_DTYPE_CI32 ||
               t == CBF_DTYPE_CI64 || t == CBF_DTYPE_CF32;
    switch (t) {
    case CBF_DTYPE_U8: case CBF_DTYPE_PACKED: return H5T_NATIVE_UINT8;
    case CBF_DTYPE_I8: case CBF_DTYPE_CI4: case CBF_DTYPE_CI8: return H5T_NATIVE_INT8;
    case CBF_DTYPE_I16: return H5T_NATIVE_INT16;
    case CBF_DTYPE_I32: case CBF_DTYPE_CI32: return H5T_NATIVE_INT32;
    case CBF_DTYPE_I64: case CBF_DTYPE_CI64: return H5T_NATIVE_INT64;
    case CBF_DTYPE_U64: return H5T_NATIVE_UINT64;
    case CBF_DTYPE_F32: case CBF_DTYPE_CF32: return H5T_NATIVE_FLOAT;
    case CBF_DTYPE_F64: return H5T_NATIVE_DOUBLE;
    }
    return -1;
}

/* mkdir -p of path's parent folder. */
static int filesink_make_parents(const char *path)
{
    char dir[4096];
    if (strlen(path) >= sizeof dir)
        return -1;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(dir, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* The descriptor's own `bits` (the digitiser's sample width, which pfb and
 * ddc outputs carry) would collide with the group's, the stored values'. */
static const char *filesink_attr_name(const char *name)
{
    return strcmp(name, CBF_ATTR_BITS) ? name : "adc_bits";
}

static int filesink_write_attrs(filesink *s, input *in, cbf_node *peer, int index)
{
    const cbf_port_desc *d = &in->desc;
    const char *axes[CBF_MAX_DIMS + 2];
    int k = 0, rc = 0;
    axes[k++] = "time";
    for (int i = 0; i < d->ndim; i++)
        axes[k++] = d->axes[i];
    if (in->row_rank > d->ndim)
        axes[k++] = "re_im";
    rc |= h5u_attr_strings(in->data, "axes", axes, (size_t)k);
    rc |= h5u_attr_string(in->group, "producer", cbf_node_name(peer));
    rc |= h5u_attr_string(in->group, "producer_plugin", cbf_node_plugin(peer));
    rc |= h5u_attr_i64(in->group, "edge", index);
    rc |= h5u_attr_string(in->group, "type", d->type ? d->type : "");
    rc |= h5u_attr_string(in->group, "dtype", cbf_dtype_name(d->dtype));
    rc |= h5u_attr_i64(in->group, "bits", fs_bits_of(d));
    rc |= h5u_attr_string(in->group, "mem", cbf_mem_kind_name(d->mem));
    rc |= h5u_attr_string(in->group, "present_axis", d->present_axis ? d->present_axis : "");
    rc |= h5u_attr_string(in->group, "aux_layout", d->aux_layout ? d->aux_layout : "");
    rc |= h5u_attr_i64(in->group, "timestamp_step", (long long)d->timestamp_step);
    rc |= fs_meaning_write(in->group, d, peer, &s->labels);
    /* A descriptor attribute never replaces one of the names above. */
    for (int i = 0; i < d->n_attrs; i++) {
        const char *name = filesink_attr_name(d->attr_names[i]);
        if (H5Aexists(in->group, name) == 0)
            rc |= h5u_attr_double(in->group, name, d->attr_values[i]);
    }
    const cbf_params *pp = cbf_node_params(peer);
    hid_t pg = H5Gcreate2(in->group, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (pg < 0)
        return -1;
    for (size_t i = 0; pp && i < cbf_params_count(pp); i++)
        rc |= h5u_attr_string(pg, cbf_params_name_at(pp, i), cbf_params_text_at(pp, i));
    H5Gclose(pg);
    return rc ? -1 : 0;
}

/* A beam stream's heaps each carry beam_ants (katgpucbf's 0x5004): kept
 * as dataset beam_ants [buffers][batch][beam][range], whichever form of the
 * stream came (contracts/beam.h), so a file from the beamformer and one
 * from the network read the same. */
static int filesink_open_beam(filesink *s, input *in, cbf_error *err)
{
    const cbf_port_desc *d = &in->desc;
    if (!d->type || strcmp(d->type, CBF_TYPE_BEAM_BATCH) || cbf_beam_batch_of(d, &in->beam))
        return 0;
    in->is_beam = true;
    in->beam_row[0] = in->beam.batches;
    in->beam_row[1] = in->beam.n_beams;
    in->beam_row[2] = in->beam.per_heap ? in->beam.ranges : 1;
    const size_t words = (size_t)(in->beam_row[0] * in->beam_row[1] * in->beam_row[2]);
    if (!(in->beam_words = malloc(words * sizeof(uint32_t))))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    in->beam_ants = h5u_create_rows(in->group, "beam_ants", H5T_NATIVE_UINT32, 3, in->beam_row);
    if (in->beam_ants < 0)
        return cbf_error_set(err, CBF_EIO, "%s: cannot create /%s/beam_ants", s->path, in->group_name);
    return 0;
}

static int filesink_open_input(filesink *s, input *in, int index, cbf_error *err)
{
    const cbf_port_desc *d = cbf_port_get_desc(in->port);
    cbf_node *peer = cbf_port_peer(in->port);
    if (!d || !peer)
        return cbf_error_set(err, CBF_EINTERNAL, "input %d has no producer", index);
    in->desc = *d;
    in->index = index;
    int complex;
    in->type = filesink_type_of(d->dtype, &complex);
    in->expand_ci4 = d->dtype == CBF_DTYPE_CI4;
    in->row_rank = d->ndim;
    for (int i = 0; i < d->ndim; i++)
        in->row[i] = d->shape[i];
    if (complex)
        in->row[in->row_rank++] = 2;
    in->payload = cbf_port_desc_bytes(d);
    const size_t staged = in->expand_ci4 ? 2 * in->payload : in->payload;
    if (in->expand_ci4 || d->mem != CBF_MEM_HOST) {
        in->host = malloc(staged ? staged : 1);
        if (!in->host)
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    /* Named after the producer; a second edge from the same node gets the
     * edge index appended, so names stay unique and stable. */
    snprintf(in->group_name, sizeof in->group_name, "%s", cbf_node_name(peer));
    for (int j = 0; j < index; j++)
        if (strcmp(s->in[j].group_name, in->group_name) == 0) {
            snprintf(in->group_name, sizeof in->group_name, "%s.%d", cbf_node_name(peer),
                     index);
            break;
        }
    const hsize_t np = d->n_present, na = d->aux_size;
    in->group = H5Gcreate2(s->file, in->group_name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (in->group < 0 ||
        (in->data = h5u_create_rows(in->group, "data", in->type, in->row_rank, in->row)) < 0 ||
        (in->ts = h5u_create_rows(in->group, "timestamp", H5T_NATIVE_INT64, 0, NULL)) < 0 ||
        (in->seq = h5u_create_rows(in->group, "seq", H5T_NATIVE_UINT64, 0, NULL)) < 0 ||
        (in->saturated = h5u_create_rows(in->group, "saturated", H5T_NATIVE_UINT64, 0, NULL)) < 0 ||
        (in->missing = h5u_create_rows(in->group, "missing", H5T_NATIVE_UINT64, 0, NULL)) < 0 ||
        (np && (in->present = h5u_create_rows(in->group, "present", H5T_NATIVE_UINT8, 1, &np)) < 0) ||
        (na && (in->aux = h5u_create_rows(in->group, "aux", H5T_NATIVE_UINT8, 1, &na)) < 0) ||
        filesink_write_attrs(s, in, peer, index) < 0)
        return cbf_error_set(err, CBF_EIO, "%s: cannot create group /%s", s->path,
                             in->group_name);
    return filesink_open_beam(s, in, err);
}

static void filesink_close_id(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id > 0)
        fn(*id);
    *id = -1;
}

static void filesink_fini(cbf_node *node)
{
    filesink *s = cbf_node_state(node);
    if (!s)
        return;
    pthread_mutex_lock(&filesink_h5_lock);
    for (int i = 0; i < s->n && s->in; i++) {
        input *in = &s->in[i];
        if (in->data > 0) {
            char shape[160];
            int k = snprintf(shape, sizeof shape, "[%llu", (unsigned long long)in->written);
            for (int j = 0; j < in->row_rank && k < (int)sizeof shape; j++)
                k += snprintf(shape + k, sizeof shape - (size_t)k, ", %llu",
                              (unsigned long long)in->row[j]);
            cbf_log_info("wrote %s:/%s/data %s] %s, %llu buffers (%llu dropped), %llu missing",
                         s->path, in->group_name, shape, cbf_dtype_name(in->desc.dtype),
                         (unsigned long long)in->written, (unsigned long long)in->dropped,
                         (unsigned long long)in->missing_total);
        }
        hid_t *ds[] = {&in->data, &in->ts, &in->seq, &in->present, &in->saturated,
                       &in->missing, &in->aux, &in->beam_ants};
        for (size_t j = 0; j < sizeof ds / sizeof ds[0]; j++)
            filesink_close_id(ds[j], H5Dclose);
        filesink_close_id(&in->group, H5Gclose);
        free(in->host);
        free(in->beam_words);
    }
    filesink_close_id(&s->file, H5Fclose);
    pthread_mutex_unlock(&filesink_h5_lock);
    /* Another node's init failed after this one made the file: nothing
     * ran, so no empty file is left to look like a capture. */
    if (s->created && !s->ran)
        unlink(s->partial);
    free(s->in);
    free(s->path);
    free(s->partial);
    fs_labels_free(&s->labels);
    free(s);
    cbf_node_set_state(node, NULL);
}

/* File attributes sync_time and adc_sample_rate: the engine's time
 * reference, when it has one (docs/formats.md, "HDF5 files"). */
static int filesink_time_attrs(const filesink *s, const cbf_node *node)
{
    double sync, rate;
    bool has = cbf_node_time_ref(node, &sync, &rate);
    int rc = has ? h5u_attr_double(s->file, "sync_time", sync) : 0;
    if (rate > 0)
        rc |= h5u_attr_double(s->file, "adc_sample_rate", rate);
    return rc;
}

/* The file is made beside its final name and renamed there when the engine
 * runs (filesink_run): whenever `path` exists it is a whole HDF5 file, an
 * earlier file is replaced only by a capture that started, and an engine
 * that fails to start leaves nothing behind. Only a regular file is ever
 * replaced: a device (/dev/full), folder or pipe at `path` is refused, as
 * a rename would put the capture in its place rather than write to it. */
static int filesink_create_file(filesink *s, const cbf_node *node, const cbf_params *p, cbf_error *err)
{
    const char *where = cbf_params_where(p, "path");
    struct stat st;
    if (lstat(s->path, &st) == 0 && !S_ISREG(st.st_mode))
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: path: %s exists and is not a regular file (a device, folder, "
                             "link or pipe); filesink writes a new HDF5 file, choose a path "
                             "for it", where, s->path);
    if (lstat(s->path, &st) == 0 && !cbf_params_bool(p, "overwrite"))
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: %s exists; remove it, choose another path or set "
                             "overwrite: true", where, s->path);
    if (lstat(s->path, &st) == 0)   /* overwrite: true; said (asked for: info, not a warning) */
        cbf_log_info("%s: %s exists and is replaced (overwrite: true)", where, s->path);
    if (filesink_make_parents(s->path) != 0)
        return cbf_error_set(err, CBF_EIO, "%s: cannot create the folder of %s: %s",
                             where, s->path, strerror(errno));
    if (asprintf(&s->partial, "%s.partial-%ld", s->path, (long)getpid()) < 0) {
        s->partial = NULL;
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    /* The 1.10 format, for SWMR (filesink_start_swmr). */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_LATEST) >= 0)
        s->file = H5Fcreate(s->partial, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0)
        H5Pclose(fapl);
    s->created = s->file >= 0;
    void *fd = NULL;
    if (s->file < 0 || H5Fget_vfd_handle(s->file, H5P_DEFAULT, &fd) < 0 || !fd)
        return cbf_error_set(err, CBF_EIO, "%s: cannot create HDF5 file %s", where,
                             s->partial);
    s->fd = *(int *)fd;
    return h5u_attr_string(s->file, "creator", "cbf filesink") < 0 || filesink_time_attrs(s, node) < 0
               ? cbf_error_set(err, CBF_EIO, "cannot write to %s", s->partial)
               : 0;
}

/* Once every group, dataset and attribute exists: SWMR writing orders
 * HDF5's metadata writes (a child before what points to it), so the file
 * on disk is whole between any two of them, and a process killed at any
 * moment leaves a file that holds every buffer flushed before. It allows
 * no new objects, which filesink makes only here. */
static int filesink_start_swmr(filesink *s, cbf_error *err)
{
    for (int i = 0; i < s->n; i++)   /* groups are done with; SWMR wants only datasets open */
        filesink_close_id(&s->in[i].group, H5Gclose);
    if (H5Fstart_swmr_write(s->file) < 0)
        return cbf_error_set(err, CBF_EIO, "%s: cannot start SWMR writing", s->partial);
    return 0;
}

static int filesink_init(cbf_node *node, cbf_error *err)
{
    filesink *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    s->file = -1;
    s->fd = -1;
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    s->path = strdup(cbf_params_string(p, "path"));
    s->n = cbf_node_port_count(node, "in");
    s->in = calloc((size_t)(s->n > 0 ? s->n : 1), sizeof *s->in);
    if (!s->path || !s->in)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = fs_labels_parse(&s->labels, cbf_params_string(p, "input_labels"), err);
    if (rc)
        return rc;
    s->c_written = cbf_node_counter(node, "buffers_written");
    s->c_dropped = cbf_node_counter(node, "buffers_dropped");
    cbf_counter_describe(s->c_written, "", "buffers written to the file");
    cbf_counter_describe(s->c_dropped, "", "buffers not written (past max_buffers, or while capture is stopped)");
    pthread_mutex_lock(&filesink_h5_lock);
    /* HDF5 would print its error stack to stderr; errors are returned instead. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    s->fsync = cbf_params_bool(p, "fsync");
    rc = filesink_create_file(s, node, p, err);
    for (int i = 0; rc == 0 && i < s->n; i++) {
        input *in = &s->in[i];
        in->node = node;
        in->port = cbf_node_port(node, "in", i);
        in->max = (uint64_t)cbf_params_int(p, "max_buffers");
        atomic_init(&in->capturing, cbf_params_bool(p, "capture"));
        in->data = in->ts = in->seq = in->present = in->saturated = in->missing = in->aux = -1;
        in->group = -1;
        rc = filesink_open_input(s, in, i, err);
    }
    if (rc == 0)
        rc = filesink_start_swmr(s, err);
    pthread_mutex_unlock(&filesink_h5_lock);
    return rc;
}

/* CI4 holds the real part in the high nibble; HDF5 gets int8 [re, im]. */
static void filesink_expand_ci4(const uint8_t *src, size_t n, int8_t *dst)
{
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = (int8_t)((int8_t)src[i] >> 4);
        dst[2 * i + 1] = (int8_t)((int8_t)(uint8_t)(src[i] << 4) >> 4);
    }
}

/* Room left for the file to grow under the process's file size limit
 * (ulimit -f), and, where `statvfs` is asked, the file system's free space
 * for this user. */
static uint64_t filesink_room(const filesink *s, bool statvfs_too)
{
    uint64_t room = UINT64_MAX;
    struct statvfs v;
    if (statvfs_too && fstatvfs(s->fd, &v) == 0)
        room = (uint64_t)v.f_bavail * v.f_frsize;
    struct rlimit l;
    struct stat st;
    if (getrlimit(RLIMIT_FSIZE, &l) == 0 && l.rlim_cur != RLIM_INFINITY && fstat(s->fd, &st) == 0) {
        uint64_t left = l.rlim_cur > (rlim_t)st.st_size ? (uint64_t)(l.rlim_cur - (rlim_t)st.st_size) : 0;
        room = left < room ? left : room;
    }
    return room;
}

/* Bytes kept free for HDF5's metadata (chunk indexes, object headers)
 * that a buffer's flush writes beside its data. */
#define ROOM_RESERVE (1u << 20)

/* A write that fails half-way leaves HDF5's cache unable to close the file
 * (and the library crashing as it unloads): a buffer the disk cannot hold
 * is refused before any byte of it is written, so the file closes whole,
 * with every buffer before it. The room is taken, not only looked at: the
 * blocks past the file's end are allocated (fallocate, the size left as
 * it is), so another writer filling the disk meanwhile cannot take them.
 * Where the file system cannot allocate ahead, its free space is checked
 * instead. Under filesink_h5_lock: the inputs take room in turn. */
static int filesink_reserve(filesink *s, input *in, uint64_t need)
{
    struct stat st;
    int why = 0;
    uint64_t room = filesink_room(s, false);
    if (room >= need) {
        if (fstat(s->fd, &st) != 0)
            why = errno;
        else if (fallocate(s->fd, FALLOC_FL_KEEP_SIZE, st.st_size, (off_t)need) != 0)
            why = errno;
        if (why == EOPNOTSUPP || why == ENOSYS) {
            why = 0;
            room = filesink_room(s, true);
        }
    }
    if (room >= need && !why)
        return 0;
    if (why == ENOSPC || why == EDQUOT || room < need) {
        if (room >= need)
            room = filesink_room(s, true);
        return cbf_error_set(&in->err, CBF_EIO, "%s: no room for buffer %llu of /%s: %.1f MB left "
                             "(file system space or the file size limit), %.1f MB needed; the file "
                             "holds the buffers before it", s->path, (unsigned long long)in->written,
                             in->group_name, 1e-6 * (double)room, 1e-6 * (double)need);
    }
    return cbf_error_set(&in->err, CBF_EIO, "%s: cannot reserve room for buffer %llu of /%s: %s; "
                         "the file holds the buffers before it", s->path,
                         (unsigned long long)in->written, in->group_name, strerror(why));
}

static int filesink_write_buffer(filesink *s, input *in, cbf_buffer *b)
{
    const uint64_t need = (uint64_t)in->payload * (in->expand_ci4 ? 2 : 1) + in->desc.n_present +
                          in->desc.aux_size + 64 + (in->is_beam ? 4 * in->beam_row[0] * in->beam_row[1] * in->beam_row[2] : 0) +
                          ROOM_RESERVE;
    const void *payload = b->data;
    if (b->kind != CBF_MEM_HOST) {
        if (cbf_buffer_copy_to_host(b, in->host, in->payload, &in->err) != 0)
            return in->err.code;
        payload = in->host;
    }
    if (in->expand_ci4) {
        /* Expand from the back of the staging area into its front. */
        uint8_t *packed = in->host + in->payload;
        memmove(packed, payload, in->payload);
        filesink_expand_ci4(packed, in->payload, (int8_t *)in->host);
        payload = in->host;
    }
    const hsize_t n = in->written, np = in->desc.n_present, na = in->desc.aux_size;
    int rc = 0;
    pthread_mutex_lock(&filesink_h5_lock);
    if (filesink_reserve(s, in, need)) {
        pthread_mutex_unlock(&filesink_h5_lock);
        return in->err.code;
    }
    rc |= h5u_append(in->data, in->type, in->row_rank, in->row, n, payload);
    rc |= h5u_append(in->ts, H5T_NATIVE_INT64, 0, NULL, n, &b->timestamp);
    rc |= h5u_append(in->seq, H5T_NATIVE_UINT64, 0, NULL, n, &b->seq);
    rc |= h5u_append(in->saturated, H5T_NATIVE_UINT64, 0, NULL, n, &b->saturated);
    rc |= h5u_append(in->missing, H5T_NATIVE_UINT64, 0, NULL, n, &b->missing);
    if (np)
        rc |= h5u_append(in->present, H5T_NATIVE_UINT8, 1, &np, n, b->present);
    if (na)
        rc |= h5u_append(in->aux, H5T_NATIVE_UINT8, 1, &na, n, b->aux);
    if (in->is_beam) {
        cbf_beam_ants_table(&in->beam, b->present, b->aux, in->beam_words);
        rc |= h5u_append(in->beam_ants, H5T_NATIVE_UINT32, 3, in->beam_row, n, in->beam_words);
    }
    /* Every buffer is flushed (to the OS: a SIGKILL then loses only the
     * buffer being written), and with `fsync` synced to the disk (a power
     * loss too). docs/reliability.md gives the cost. */
    if (rc == 0)
        rc |= H5Fflush(s->file, H5F_SCOPE_LOCAL) < 0;
    if (rc == 0 && s->fsync)
        rc |= fsync(s->fd) != 0;
    int why = rc ? errno : 0;   /* what the failed write(2) said (HDF5 keeps it) */
    pthread_mutex_unlock(&filesink_h5_lock);
    if (rc)
        return cbf_error_set(&in->err, CBF_EIO, "%s: writing buffer %llu of /%s failed: %s; the file "
                             "holds the buffers before it",
                             s->path, (unsigned long long)n, in->group_name,
                             why ? strerror(why) : "HDF5 error");
    in->written++;
    in->missing_total += b->missing;
    cbf_counter_add(s->c_written, 1);
    return 0;
}

/* Drains one input to its end. A write that fails (a full disk) stops
 * every input at its next buffer, and the node fails with the error: the
 * engine then stops its producers, rather than running on with nothing
 * recorded. */
static void *filesink_drain(void *arg)
{
    input *in = arg;
    filesink *s = cbf_node_state(in->node);
    cbf_node_thread_start(in->node, "in", in->index);
    /* HDF5's error printing is per thread: the errors come back as ours. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (;;) {
        cbf_buffer *b;
        if (atomic_load(&s->failed) || cbf_port_recv(in->port, &b) != 0)
            break;
        if (atomic_load(&in->capturing) && (in->max == 0 || in->written < in->max)) {
            if ((in->rc = filesink_write_buffer(s, in, b)))
                atomic_store(&s->failed, true);
        } else {
            in->dropped++;
            cbf_counter_add(s->c_dropped, 1);
        }
        cbf_buffer_unref(b);
    }
    return NULL;
}

static int filesink_run(cbf_node *node, cbf_error *err)
{
    filesink *s = cbf_node_state(node);
    s->ran = true;
    if (rename(s->partial, s->path) != 0)
        return cbf_error_set(err, CBF_EIO, "cannot rename %s to %s: %s", s->partial, s->path,
                             strerror(errno));
    /* One reader per input: reading them in turn from one thread could
     * stall a fast producer behind a slow one sharing its upstream. */
    for (int i = 1; i < s->n; i++)
        s->in[i].threaded = pthread_create(&s->in[i].thread, NULL, filesink_drain, &s->in[i]) == 0;
    for (int i = 0; i < s->n; i++)
        if (!s->in[i].threaded)
            filesink_drain(&s->in[i]);
    for (int i = 1; i < s->n; i++)
        if (s->in[i].threaded)
            pthread_join(s->in[i].thread, NULL);
    pthread_mutex_lock(&filesink_h5_lock);
    H5Fflush(s->file, H5F_SCOPE_GLOBAL);
    pthread_mutex_unlock(&filesink_h5_lock);
    for (int i = 0; i < s->n; i++)
        if (s->in[i].rc) {
            *err = s->in[i].err;
            return s->in[i].rc;
        }
    return 0;
}

/* On the node's thread (cbf/control.h); the inputs' readers see the flag
 * from their next buffer on. */
static int filesink_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    filesink *s = cbf_node_state(node);
    const cbf_params *p = cbf_request_args(req);
    int which = (int)cbf_params_int(p, "input");
    bool on = !strcmp(cbf_params_string(p, "action"), "start");
    if (which >= s->n)
        return cbf_error_set(err, CBF_EINVAL, "capture: input %d: this filesink has %d", which, s->n);
    for (int i = 0; i < s->n; i++)
        if (which < 0 || i == which)
            atomic_store(&s->in[i].capturing, on);
    cbf_reply_string(reply, "capture", on ? "started" : "stopped");
    uint64_t written = 0;
    for (int i = 0; i < s->n; i++)
        written += s->in[i].written;
    cbf_reply_int(reply, "buffers_written", (int64_t)written);
    return 0;
}

static const cbf_plugin_desc filesink_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "filesink",
    .version = "0.1.0",
    .summary = "writes any buffers to an HDF5 file, one group per input edge",
    .params = filesink_params,
    .n_params = CBF_COUNT_OF(filesink_params),
    .ports = filesink_ports,
    .n_ports = CBF_COUNT_OF(filesink_ports),
    .init = filesink_init,
    .run = filesink_run,
    .fini = filesink_fini,
    .requests = filesink_requests,
    .n_requests = CBF_COUNT_OF(filesink_requests),
    .request = filesink_request,
};

CBF_PLUGIN_DEFINE(filesink_desc)
