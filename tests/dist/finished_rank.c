/* finished_rank.c: a rank that finished normally while another still waits for it in a
 * collective (2 ranks of `mpirun`): rank 1 calls dm_dist_finalize and exits; rank 0's
 * next collective must fail within seconds, saying that rank 1 finished, not after the
 * timeout (60 s here) calling it lost or stopped. Rank 0 prints its verdict
 * ("finished-rank: ok" or "finished-rank: FAIL ...") and ends the job (dm_dist_abort),
 * since its collective can never complete; the test script reads the verdict. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "demitasse.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
  int rank = 0, size = 0;
  if (dm_dist_init(&rank, &size) != DM_OK || size != 2) {
    fprintf(stderr, "dm_dist_init (2 ranks wanted, %d): %s\n", size, dm_last_error());
    return 1;
  }
  dm_dist_set_timeout(60);
  double v = 1;
  if (dm_dist_mean(&v, 1) != DM_OK) { /* both ranks in step first */
    fprintf(stderr, "rank %d: the first mean failed: %s\n", rank, dm_last_error());
    return 1;
  }
  if (rank == 1) {
    dm_dist_finalize();
    return 0;
  }
  double t0 = now_s();
  dm_status s = dm_dist_mean(&v, 1);
  double took = now_s() - t0;
  int ok = s == DM_ERR_IO && strstr(dm_last_error(), "rank 1 finished") && took < 20;
  printf("finished-rank: %s (%s after %.1f s: %s)\n", ok ? "ok" : "FAIL", dm_status_name(s),
         took, dm_last_error());
  fflush(stdout);
  dm_dist_abort(ok ? 0 : 1);
  return ok ? 0 : 1;
}
