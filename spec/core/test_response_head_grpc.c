/*
 * The client's reading of grpc-status from a response head (response_head.c): a header or a trailer line (libcurl
 * hands both to the header callback), any case of the name, the first line winning, a new response forgetting it;
 * a value that is no gRPC status code 0..16 read as 2 (UNKNOWN) with grpc_bad set, never as a number cut short.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../core/src/client/response_head.h"

static void feed(rfi_response_head *h, const char *line) { rfi_response_head_line(h, line, strlen(line)); }

static void test_grpc_status_header_and_trailer(void **state) {
    (void)state;
    rfi_response_head h;
    rfi_response_head_init(&h, NULL);
    assert_int_equal(h.grpc_status, 0);
    assert_false(h.has_grpc_status);
    feed(&h, "HTTP/2 200\r\n");
    feed(&h, "content-type: application/grpc\r\n");
    feed(&h, "\r\n");
    feed(&h, "grpc-status: 14\r\n"); /* a trailer, after the head's blank line */
    assert_true(h.has_grpc_status);
    assert_int_equal(h.grpc_status, 14);
    assert_false(h.grpc_bad);
    feed(&h, "grpc-status: 3\r\n"); /* the first line wins */
    assert_int_equal(h.grpc_status, 14);
    feed(&h, "HTTP/2 200\r\n"); /* a new response forgets it */
    assert_false(h.has_grpc_status);
    assert_int_equal(h.grpc_status, 0);
    feed(&h, "Grpc-Status:\t16 \r\n");
    assert_int_equal(h.grpc_status, 16);
    feed(&h, "HTTP/2 200\r\n");
    feed(&h, "grpc-status: 0\r\n");
    assert_true(h.has_grpc_status);
    assert_int_equal(h.grpc_status, 0);
    assert_false(h.grpc_bad);
}

static void test_grpc_status_bad_values_read_as_unknown(void **state) {
    (void)state;
    static const char *const bad[] = {"grpc-status: 17\r\n", "grpc-status: -1\r\n",  "grpc-status: 1x\r\n",
                                      "grpc-status: \r\n",   "grpc-status: 014\r\n", "grpc-status: 99999999999\r\n",
                                      "grpc-status: 1 4\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rfi_response_head h;
        rfi_response_head_init(&h, NULL);
        feed(&h, bad[i]);
        assert_true(h.has_grpc_status);
        assert_true(h.grpc_bad);
        assert_int_equal(h.grpc_status, 2);
    }
    rfi_response_head h;
    rfi_response_head_init(&h, NULL);
    feed(&h, "grpc-statusx: 14\r\n"); /* another header */
    feed(&h, "x-grpc-status: 14\r\n");
    assert_false(h.has_grpc_status);
    assert_int_equal(h.grpc_status, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grpc_status_header_and_trailer),
        cmocka_unit_test(test_grpc_status_bad_values_read_as_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
