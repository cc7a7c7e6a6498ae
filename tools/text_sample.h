/* text_sample.h: the next-token sampler of `demitasse generate`: a seeded PRNG of its
 * own (xoshiro256** seeded through splitmix64, so a seed gives the same text on every
 * machine and libc, which rand() does not promise) and temperature / top-k sampling
 * from a row of logits. */
#ifndef DM_TOOLS_TEXT_SAMPLE_H
#define DM_TOOLS_TEXT_SAMPLE_H

#include <stdint.h>

#include "core/status.h"

typedef struct dm_rng {
  uint64_t s[4];
} dm_rng;

void dm_rng_seed(dm_rng *r, uint64_t seed);
uint64_t dm_rng_next(dm_rng *r);
/* Uniform in [0, 1), 53 random bits. */
double dm_rng_uniform(dm_rng *r);

typedef struct dm_sample_z {
  double v; /* logit / temperature */
  int32_t id;
} dm_sample_z;

/* The settings, the PRNG and the scratch of dm_sample_token over V logits. */
typedef struct dm_sampler {
  int32_t V;
  double temperature; /* 0: greedy (the largest logit, the lowest id on a tie) */
  int32_t top_k;      /* 0 or V: every token; else only the k largest logits */
  dm_rng rng;
  dm_sample_z *z; /* [V] */
} dm_sampler;

/* V >= 1, temperature >= 0 and finite, 0 <= top_k <= V (checked by the caller). */
dm_status dm_sampler_init(dm_sampler *s, int32_t V, double temperature, int32_t top_k,
                          uint64_t seed);
void dm_sampler_free(dm_sampler *s);
/* The next token from logits[V]: softmax(logits / temperature) over the top-k. A NaN or
 * +inf logit, or every logit -inf, is DM_ERR_INVALID naming the token. */
dm_status dm_sample_token(dm_sampler *s, const float *logits, int32_t *out);

#endif
