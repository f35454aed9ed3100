/* katcp_serve.c: katcp_demo.h's two servers for a test in another
 * language (test_katcp_server.py): prints "A HOST:PORT" and "B HOST:PORT",
 * then serves until its standard input ends. */
#include <stdio.h>

#include "katcp_demo.h"

int main(void)
{
    katcp_demo d;
    cbf_error err;
    if (katcp_demo_open(&d, &err)) {
        fprintf(stderr, "katcp_serve: %s\n", err.msg);
        return 1;
    }
    printf("A %s\nB %s\n", cbf_katcp_server_address(d.a), cbf_katcp_server_address(d.b));
    fflush(stdout);
    while (getchar() != EOF)
        ;
    katcp_demo_close(&d);
    return 0;
}
