/* array_load: loads each pipeline named on the command line as cbf-run
 * would before starting it (cbf_graph_load: YAML, every node's parameters
 * against its plugin, the edges and port types), starting nothing. Used by
 * check_array.py on the files cbf-array writes. Plugins from
 * $CBF_PLUGIN_PATH. Exit 0 every file loaded; 1 otherwise, each error
 * printed. */
#include <stdio.h>

#include "cbf/graph.h"

int main(int argc, char **argv)
{
    cbf_error err = {0};
    cbf_registry *reg;
    if (cbf_registry_open(NULL, 0, &reg, &err)) {
        fprintf(stderr, "array_load: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        cbf_graph *g;
        if (cbf_graph_load(argv[i], NULL, 0, reg, &g, &err)) {
            fprintf(stderr, "array_load: %s\n", err.msg);
            bad++;
            continue;
        }
        cbf_graph_free(g);
    }
    cbf_registry_close(reg);
    printf("array_load: %d of %d pipelines loaded\n", argc - 1 - bad, argc - 1);
    return bad ? 1 : 0;
}
