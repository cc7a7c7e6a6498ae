/* text_sample.c: xoshiro256** and temperature / top-k sampling (see text_sample.h). */
#include "text_sample.h"

#include <math.h>
#include <stdlib.h>

/* splitmix64: spreads one 64-bit seed over xoshiro's 256-bit state (never all zero). */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void dm_rng_seed(dm_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dm_rng_next(dm_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double dm_rng_uniform(dm_rng *r) { return (double)(dm_rng_next(r) >> 11) * 0x1p-53; }

dm_status dm_sampler_init(dm_sampler *s, int32_t V, double temperature, int32_t top_k,
                          uint64_t seed) {
  *s = (dm_sampler){.V = V, .temperature = temperature, .top_k = top_k};
  dm_rng_seed(&s->rng, seed);
  if (!(s->z = malloc((size_t)V * sizeof *s->z)))
    return DM_NOMEM("the sampler");
  return DM_OK;
}

void dm_sampler_free(dm_sampler *s) {
  free(s->z);
  s->z = NULL;
}

/* The larger value first, the lower id on a tie: the order, and so the top k, do not
 * depend on qsort's instability. */
static int by_value_desc(const void *a, const void *b) {
  const dm_sample_z *x = a, *y = b;
  if (x->v != y->v)
    return x->v > y->v ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

dm_status dm_sample_token(dm_sampler *s, const float *logits, int32_t *out) {
  int32_t V = s->V, best = -1;
  for (int32_t i = 0; i < V; i++) {
    if (isnan(logits[i]) || (isinf(logits[i]) && logits[i] > 0))
      return dm_error(DM_ERR_INVALID, "the logit of token %d is %s", i,
                      isnan(logits[i]) ? "NaN" : "+inf");
    if (logits[i] > -INFINITY && (best < 0 || logits[i] > logits[best]))
      best = i;
  }
  if (best < 0)
    return dm_error(DM_ERR_INVALID, "every logit is -inf: no token can follow");
  if (s->temperature == 0 || s->top_k == 1) {
    *out = best;
    return DM_OK;
  }
  /* softmax(z / T) over the kept tokens, shifted by the largest z for range */
  double top = (double)logits[best] / s->temperature;
  for (int32_t i = 0; i < V; i++)
    s->z[i] = (dm_sample_z){(double)logits[i] / s->temperature, i};
  int32_t kept = V;
  if (s->top_k > 0 && s->top_k < V) {
    qsort(s->z, (size_t)V, sizeof *s->z, by_value_desc);
    kept = s->top_k;
  }
  double sum = 0;
  for (int32_t k = 0; k < kept; k++)
    sum += exp(s->z[k].v - top); /* a -inf logit weighs 0 */
  double u = dm_rng_uniform(&s->rng) * sum, acc = 0;
  int32_t pick = best; /* where rounding leaves u at the very end */
  for (int32_t k = 0; k < kept; k++) {
    double w = exp(s->z[k].v - top);
    acc += w;
    if (w > 0 && u < acc) {
      pick = s->z[k].id;
      break;
    }
  }
  *out = pick;
  return DM_OK;
}
