/* Helpers shared by the loader tests: pipelines written to a private
 * temporary directory, and checks of error messages by place and content. */
#ifndef LOADER_UTIL_H
#define LOADER_UTIL_H

#include <stddef.h>
#include "cbf/graph.h"
#include "graph/graph_model.h"

/* Directory of the built test plugins of one group ("good", "bad_abi", ...). */
const char *tu_plugin_dir(const char *group);
/* A fresh temporary directory for this process (removed at exit). */
const char *tu_tmpdir(void);
/* Writes text to <tmpdir>/name and returns the full path (static buffer). */
const char *tu_write(const char *name, const char *text);
/* Registry over good/ only (plus the build tree, which holds valid plugins). */
cbf_registry *tu_registry(void);

/* Loads yaml (written as p.yaml) with the given overrides. */
int tu_load(const char *yaml, const char *const *ov, size_t n_ov, cbf_graph **g, cbf_error *err);

/* Loads yaml, expects failure with code, the message starting
 * "<path>:<line>:<col>: " and containing every NULL-terminated needle. */
void tu_expect_error(const char *yaml, const char *const *ov, size_t n_ov, int code, int line,
                     int col, ...);

/* Index of the node of that name in g, or -1. */
long tu_node(const cbf_graph *g, const char *name);

#endif
