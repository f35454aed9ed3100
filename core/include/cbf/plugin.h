/* cbf/plugin.h: the contract between the runtime and a stage plugin.
 *
 * A plugin is a shared object named cbf_<name>.so that exports one symbol,
 * CBF_PLUGIN_ENTRY_SYMBOL, returning a static descriptor. The loader refuses
 * a descriptor whose abi differs from CBF_PLUGIN_ABI.
 *
 * Life of a node: init (in topological order, upstream first: read params
 * and input descriptors, set output descriptors, create pools) -> run (on
 * the node's own thread, until its inputs end or, for a source, until
 * cbf_node_stopping or its finite length) -> fini (always, after every run
 * has returned and before pools are checked). Requests (cbf/control.h)
 * arrive on the node's thread while run is going. */
#ifndef CBF_PLUGIN_H
#define CBF_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>
#include "cbf/control.h"
#include "cbf/error.h"
#include "cbf/node.h"
#include "cbf/params.h"
#include "cbf/port.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: requests (cbf/control.h) appended to the descriptor.
 * 3: cbf_port_decl gained `flags` (CBF_PORT_WRITES_INPUT), which changes its
 *    size and so the layout of every plugin's port table.
 * 4: cbf_request_decl gained `flags` (CBF_REQUEST_READS) and cbf_param_decl
 *    gained `flags` (CBF_PARAM_TIMESTAMP), which change the layout of every
 *    plugin's request and parameter tables. */
#define CBF_PLUGIN_ABI 4u
#define CBF_PLUGIN_ENTRY_SYMBOL "cbf_plugin_entry"

typedef enum cbf_port_dir { CBF_PORT_IN = 0, CBF_PORT_OUT = 1 } cbf_port_dir;

/* Port flags (cbf_port_decl.flags). */
/* Input only: the plugin changes the buffers it receives in place (an FFT
 * over its input, say). Fan-out hands every consumer the same buffer, so
 * the loader refuses an output wired to several inputs when any of them
 * has this flag (naming the edge's file:line:column): the writer would
 * change what the others read. Such a plugin may still check
 * cbf_buffer_is_writable() to be sure. */
#define CBF_PORT_WRITES_INPUT (1u << 0)

typedef struct cbf_port_decl {
    const char *name;
    cbf_port_dir dir;
    const char *type;   /* buffer type, e.g. "cbf.adc.packed". An output names one type.
                           An input names the types it takes, as alternatives separated
                           by '|' ("cbf.adc.packed|cbf.ddc.complex"), and an edge is
                           accepted when the producer's type is one of them; an input of
                           type "*" accepts any type (generic sinks such as filesink) */
    int optional;       /* may be left unwired */
    int multi;          /* input only: accepts several edges, indexed in YAML order */
    const char *doc;
    unsigned flags;     /* CBF_PORT_* bits; last, so positional tables without it
                           still compile (as 0) */
} cbf_port_decl;

/* Whether an input of type `takes` (alternatives "a|b", or "*") accepts a
 * producer of type `gives`. The loader's edge check. */
bool cbf_port_type_accepts(const char *takes, const char *gives);

typedef struct cbf_plugin_desc {
    uint32_t abi;                   /* CBF_PLUGIN_ABI */
    const char *name;               /* unique; what YAML `plugin:` names */
    const char *version;
    const char *summary;            /* one line */
    const cbf_param_decl *params;
    int n_params;
    const cbf_port_decl *ports;
    int n_ports;
    int (*init)(cbf_node *node, cbf_error *err);
    int (*run)(cbf_node *node, cbf_error *err);
    void (*fini)(cbf_node *node);
    /* Runtime requests the node accepts (cbf/control.h); NULL, 0, NULL for
     * none. `request` runs on the node's thread, between buffers. */
    const cbf_request_decl *requests;
    int n_requests;
    int (*request)(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err);
} cbf_plugin_desc;

typedef const cbf_plugin_desc *(*cbf_plugin_entry_fn)(void);

/* In a plugin's source: CBF_PLUGIN_DEFINE(my_desc); */
#if defined(__GNUC__)
#define CBF_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define CBF_PLUGIN_EXPORT
#endif
#define CBF_PLUGIN_DEFINE(desc) \
    CBF_PLUGIN_EXPORT const cbf_plugin_desc *cbf_plugin_entry(void) { return &(desc); }

#define CBF_COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

#ifdef __cplusplus
}
#endif
#endif
