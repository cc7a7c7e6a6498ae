/* mem_db.h: an in-memory stand-in for core/db.c, for fuzz_lmdb_record. It implements
 * core/db.h over records the fuzzer hands it, so the checkpoint Load and the training
 * DB input op decode fuzzed records through their real code, at memory speed, without
 * writing an LMDB environment per input. Read mode only: Save is out of its scope. */
#ifndef DM_FUZZ_MEM_DB_H
#define DM_FUZZ_MEM_DB_H

#include <stddef.h>

/* Forgets every record (the bytes were borrowed, nothing is freed but the index). */
void fz_memdb_clear(void);
/* Adds a record; key and value are borrowed and must outlive the DB's use. A key
 * that is already there is replaced, as an LMDB put would. Returns 0 when full. */
int fz_memdb_add(const void *key, size_t klen, const void *val, size_t vlen);

#endif
