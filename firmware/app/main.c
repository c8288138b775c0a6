/* snapuq firmware entry point: serial loop feeding the protocol parser. */
#include "../port/snapuq_port.h"
#include "snapuq_app.h"

int main(void)
{
    snapuq_port_init();
    snapuq_app_init();
    for (;;) {
        int c = snapuq_port_getc(20u);
        if (c == SNAPUQ_PORT_EOF) {
            break;
        }
        if (c >= 0) {
            snapuq_app_feed((uint8_t)c);
        } else {
            snapuq_app_poll();
        }
    }
    snapuq_port_exit(0);
    return 0;
}
