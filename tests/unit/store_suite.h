/*
 * store_suite.h - the store test suite, written once against the store
 * interface (store_suite.c) and linked into one program per store, which
 * defines how to open a fresh, empty store.
 */
#ifndef STORE_SUITE_H
#define STORE_SUITE_H

#include "idem_store.h"

/* Opens a new, empty store (the suite closes it).  Defined per store. */
idem_store *suite_open(void);

#endif
