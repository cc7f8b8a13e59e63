/* A tiny test harness for the C API tests: CHECK records a failed condition and continues,
 * RUN runs one test function, REPORT prints "N passed, M failed" (tests, not checks) and gives
 * the exit status. Plain C99. */
#ifndef SK_TEST_HARNESS_H
#define SK_TEST_HARNESS_H

#include <stdio.h>

static int sk_tests_passed;
static int sk_tests_failed;
static int sk_checks_failed_in_test;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            sk_checks_failed_in_test++;                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                             \
    } while (0)

#define CHECK_EQ(a, b)                                                                 \
    do {                                                                               \
        long long sk_a_ = (long long)(a), sk_b_ = (long long)(b);                      \
        if (sk_a_ != sk_b_) {                                                          \
            sk_checks_failed_in_test++;                                                \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n",       \
                    __FILE__, __LINE__, #a, #b, sk_a_, sk_b_);                         \
        }                                                                              \
    } while (0)

#define RUN(test)                                                       \
    do {                                                                \
        sk_checks_failed_in_test = 0;                                   \
        test();                                                         \
        if (sk_checks_failed_in_test == 0) {                            \
            sk_tests_passed++;                                          \
            printf("ok   %s\n", #test);                                 \
        } else {                                                        \
            sk_tests_failed++;                                          \
            printf("FAIL %s (%d checks)\n", #test, sk_checks_failed_in_test); \
        }                                                               \
    } while (0)

#define REPORT()                                                         \
    (printf("%d passed, %d failed\n", sk_tests_passed, sk_tests_failed), \
     sk_tests_failed == 0 ? 0 : 1)

#endif
