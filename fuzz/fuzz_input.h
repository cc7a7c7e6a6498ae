/* fuzz_input.h: a cursor over the fuzzer's bytes for the structure-aware targets
 * (fuzz_net, fuzz_lmdb_record). Reads past the end yield zeros, so every input, however
 * short, decodes to something, and a mutation changes one choice rather than the
 * whole parse. */
#ifndef DM_FUZZ_INPUT_H
#define DM_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fz_in {
  const uint8_t *p;
  size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in *in) {
  if (!in->n)
    return 0;
  in->n--;
  return *in->p++;
}

static inline uint16_t fz_u16(fz_in *in) {
  uint16_t lo = fz_u8(in);
  return (uint16_t)(lo | (uint16_t)fz_u8(in) << 8);
}

/* A choice among n (n > 0) alternatives. */
static inline size_t fz_pick(fz_in *in, size_t n) { return fz_u8(in) % n; }

/* Up to `want` bytes as a view (fewer at the end of the input). */
static inline const uint8_t *fz_bytes(fz_in *in, size_t want, size_t *got) {
  const uint8_t *p = in->p;
  *got = want < in->n ? want : in->n;
  in->p += *got, in->n -= *got;
  return p;
}

#endif
