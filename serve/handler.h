/* retryfreeze-serve: the libmicrohttpd access handler — control paths and attempts. */
#ifndef SRV_HANDLER_H
#define SRV_HANDLER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "stop.h"
#include "upstream.h"

struct srv_handler {
    struct srv_upstream *up;
    struct srv_stop *stop;
    long stall_ms;
};

/* MHD_AccessHandlerCallback; cls is a struct srv_handler. */
enum MHD_Result srv_handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                           const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls);

#endif
