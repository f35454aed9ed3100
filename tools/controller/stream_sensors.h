/* stream_sensors.h: the stream sensors a product controller shows for a
 * configuration, as katsdpcontroller's generator makes them (names,
 * katcp types, units, descriptions and values), worked out from the
 * parsed product alone (docs/controller.md, "Stream sensors").
 *
 * These are the sensors whose value the configuration fixes: bandwidths,
 * channel counts, heap shapes, group delays, the baseline ordering, the
 * beams' source indices. What the plan or the running engines give
 * (`STREAM.destination`, `STREAM.tasks`, summed clip counts, per-engine
 * sensors) the controller adds beside them. */
#ifndef CBF_STREAM_SENSORS_H
#define CBF_STREAM_SENSORS_H

#include <stddef.h>

#include "cbf/error.h"
#include "product.h"

typedef struct cbf_stream_sensor {
    char *name;                /* STREAM.NAME */
    const char *type;          /* katcp type: integer, float, string or discrete */
    const char *units;         /* "" when none */
    const char *description;
    const char *values;        /* discrete: the allowed values, comma-separated; else NULL */
    char *value;               /* in katcp's text form for the type */
} cbf_stream_sensor;

typedef struct cbf_stream_sensors {
    cbf_stream_sensor *s;
    size_t n, cap;
} cbf_stream_sensors;

/* Appends every static sensor of every output stream of p, in the
 * document's stream order. CBF_ENOMEM. */
int cbf_stream_sensors_make(const cbf_product *p, cbf_stream_sensors *out, cbf_error *err);
/* The sensor named name, or NULL. */
cbf_stream_sensor *cbf_stream_sensors_find(cbf_stream_sensors *ss, const char *name);
void cbf_stream_sensors_free(cbf_stream_sensors *ss);


#endif
