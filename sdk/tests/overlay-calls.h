/*
 * overlay-calls.h — the functions of the overlay-calls test program.
 *
 * Region 1 holds the overlays "left" and "right", region 2 the overlay
 * "other".  Calls between left and right replace the caller's code while
 * the callee runs, which is what the overlay manager's return path is for.
 */
#ifndef COPROF_SDK_TESTS_OVERLAY_CALLS_H
#define COPROF_SDK_TESTS_OVERLAY_CALLS_H

/* overlay "left", region 1 */
int left_chain(int x);
int left_recurse(int depth);
long long left_wide(int a, int b, int c, int d, int e, int f, int g, int h,
                    int i, int j);

/* overlay "right", region 1 */
int right_scale(int x);
int right_recurse(int depth);
int right_via_other(int x);

/* overlay "other", region 2 */
int other_add(int a, int b);
int other_apply(int (*function)(int), int x);

#endif
