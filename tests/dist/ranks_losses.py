"""ranks_losses.py: the data-parallel tests' loss check (lenet_ranks_test.sh, gpt_ranks_test.sh).

    losses_agree(t, spread_known, n, names=("one", "two", "ref")) -> (ok, spread_known)

Reads the `loss` column of t/one.csv (1 rank, the global batch), t/two.csv (2 ranks, half
of it each) and t/ref.csv (1 rank summing in another FP32 order: the reference engine, or
where there is none one thread instead of two) at their common logged iterations (other
file names in `names`). The runs
differ only in the order of their FP32 sums, which training amplifies, so the bound is the
measured spread: each 2-rank loss must agree with the 1-rank one within max(1e-3 relative,
4 times the largest 1-rank-vs-ref difference up to that step). Where the second order is
not known to differ (spread_known false) and the ref run equals the 1-rank run at every
step, this CPU's kernels sum the same either way: only the first 40% of the n steps are
checked, before the drift sets in, within 1e-3. The one-thread order is a weaker stand-in
than the reference engine: where its spread is smaller than the 2-rank run's drift (one
thread and two split OpenBLAS's sums alike on some CPUs, differing in few steps), the
same first-40% check decides, and the weights are not compared. Returns whether the
check passed and whether a second order was found (the callers compare weights only
then).
"""
import csv


def read_losses(path):
    with open(path) as f:
        return {int(r["iter"]): float(r["loss"]) for r in csv.DictReader(f)}


def losses_agree(t, spread_known, n, names=("one", "two", "ref")):
    one, two, ref = (read_losses("%s/%s.csv" % (t, k)) for k in names)
    common = sorted(set(one) & set(two) & set(ref))
    if len(common) < 10:
        print("only %d common logged iterations" % len(common))
        return False, spread_known
    if not spread_known and all(ref[i] == one[i] for i in common):
        common = [i for i in common if i <= 0.4 * n]
        print("no second FP32 order here (one thread sums as two): the first %d logged "
              "steps, within 1e-3" % len(common))
    elif not spread_known:
        print("the second FP32 order: the same run on one thread")
        ok = within_spread(one, two, ref, common)
        if ok:
            return True, True
        early = [i for i in common if i <= 0.4 * n]
        print("the one-thread order drifts less than the 2 ranks here: the first %d logged "
              "steps, within 1e-3, decide" % len(early))
        return within_spread(one, two, ref, early, use_ref=False), False
    return within_spread(one, two, ref, common), spread_known


def within_spread(one, two, ref, common, use_ref=True):
    """Each 2-rank loss within max(1e-3, 4 x the 1-rank-vs-ref drift so far) of the
    1-rank one (within 1e-3 where use_ref is false)."""
    ok, worst, envelope = True, 0.0, 0.0
    for i in common:
        rel = abs(two[i] - one[i]) / abs(one[i])
        if use_ref:
            envelope = max(envelope, abs(ref[i] - one[i]) / abs(one[i]))  # the drift so far
        bound = max(1e-3, 4 * envelope)
        worst = max(worst, rel / bound)
        if rel > bound:
            print("iteration %d: loss %r on 2 ranks, %r on 1 (relative %.2e, bound %.2e)"
                  % (i, two[i], one[i], rel, bound))
            ok = False
    print("losses: %d logged iterations, worst relative difference / bound %.3f"
          % (len(common), worst))
    return ok
