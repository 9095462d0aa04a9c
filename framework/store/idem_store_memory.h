/*
 * idem_store_memory.h - the memory store (idem_store_memory.c), which
 * idem_store_open makes for store = memory.
 */
#ifndef IDEM_STORE_MEMORY_H
#define IDEM_STORE_MEMORY_H

#include <stdint.h>

#include "idem_store.h"

/*
 * The in-memory store: one process, thread-safe, bounded by max_entries.
 * When full it evicts the committed record closest to expiry (counted, with
 * a warning in the log when it happens more than once a second); it never
 * evicts an in_flight record, and refuses a reservation when every entry is
 * in flight.  Returns IDEM_OK with *out (free with idem_store_close).
 */
idem_err idem_store_memory_new(uint64_t max_entries, idem_store **out);

#endif
