/* SPDX-License-Identifier: MIT */
#ifndef KOTOBA_FUZZ_STUB_RUN_H
#define KOTOBA_FUZZ_STUB_RUN_H
#include "broker/broker.h"
/* Ends a stub run: how % 3 is 0 finished, 1 setup failed, 2 worker lost. */
void stub_run_end(struct run *r, int how);
#endif
