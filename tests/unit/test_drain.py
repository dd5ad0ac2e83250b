"""drain: the time-to-drain strategy, and the rates it stands on.

(a) with equal rates and no producers it is lag-sticky; (b) never slower than lag-sticky on
the same input where every consumer counts as the same number of readers (elsewhere
lag-sticky's equal counts break drain's rule); (c) finite wherever a plan that splits topics evenly and drains is found by
another strategy, and loud where none exists; (d) sticky to the previous plan unless a new
one is more than the margin faster; (e) deterministic, valid, count-balanced: counts within
one, or within one per unit of speed where the rates differ (the shared suite covers it
without rates; here with rates). The times come from ``draintime.simulate`` (an independent replay), not from the
assignor's own arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.assignors import drain
from spark_lag_assign.core import draintime, rates
from spark_lag_assign.errors import InputError, StrategyError

CONSUMERS = ["a", "b", "c", "d", "e"]


@st.composite
def cases(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, list[str]], dict[str, float], pd.DataFrame]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    n_topics = draw(st.integers(1, 4))
    frames = []
    for t in range(n_topics):
        size = draw(st.integers(1, 14))
        lag = rng.integers(0, 1_000, size=size)
        if draw(st.booleans()):
            lag[rng.integers(size)] = int(rng.integers(10_000, 100_000))
        frames.append(pd.DataFrame({"topic": f"t{t}", "partition": np.arange(size), "lag": lag.astype(np.int64)}))
    lags = pd.concat(frames, ignore_index=True)
    consumers = CONSUMERS[: draw(st.integers(1, len(CONSUMERS)))]
    if draw(st.booleans()):
        subs = {c: sorted(set(lags["topic"])) for c in consumers}
    else:
        topics = sorted(set(lags["topic"]))
        subs = {c: sorted(set(rng.choice(topics, size=int(rng.integers(1, len(topics) + 1))).tolist())) for c in consumers}
    speeds = draw(st.sampled_from(["equal", "double", "random"]))
    base = float(rng.uniform(50, 500))
    read = {
        c: base
        * (
            1.0
            if speeds == "equal"
            else 2.0
            if (speeds == "double" and i % 2)
            else float(rng.uniform(0.5, 3))
            if speeds == "random"
            else 1.0
        )
        for i, c in enumerate(consumers)
    }
    load = draw(st.sampled_from([0.0, 0.2, 0.6, 0.9, 1.2]))
    share = rng.gamma(1.0, 1.0, size=len(lags))
    produce = load * sum(read.values()) * share / share.sum()
    produced = pd.DataFrame({"topic": lags["topic"], "partition": lags["partition"], "produce_rate": produce})
    return lags, subs, read, produced


def plan(
    lags: pd.DataFrame,
    subs: dict[str, list[str]],
    read: dict[str, float] | None,
    produced: pd.DataFrame | None,
    previous: pd.DataFrame | None = None,
    **options: object,
) -> pd.DataFrame:
    if read is not None:
        options["read_rates"] = read
    if produced is not None:
        options["produce_rates"] = produced
    out = sla.assign(lags, subs, "drain", previous, **options)
    sla.check_assignment(out, lags, subs)
    return out


def drains_in(lags: pd.DataFrame, out: pd.DataFrame, read: dict[str, float], produced: pd.DataFrame | None) -> float:
    return draintime.simulate(lags, out, read, produced, consumers=list(read)).time_to_drain


def shares(read: dict[str, float]) -> dict[str, int]:
    """Each consumer's units of speed, as the drain docstring defines them."""
    slowest = min(read.values())
    return {c: min(max(round(r / slowest), 1), 8) for c, r in read.items()}


def spreads_ok(out: pd.DataFrame, subs: dict[str, list[str]], units: dict[str, int]) -> bool:
    """Partitions per unit of speed within one: per topic among its readers, and over the
    group where subscriptions agree."""
    per = out.groupby(["topic", "consumer"]).size()
    for topic in set(out["topic"]):
        readers = [c for c, ts in subs.items() if topic in ts]
        ratio = [per.get((topic, c), 0) / units[c] for c in readers]
        if max(ratio) - min(ratio) > 1:
            return False
    if len({tuple(t) for t in subs.values()}) == 1:
        total = out.groupby("consumer").size()
        ratio = [total.get(c, 0) / units[c] for c in subs]
        if max(ratio) - min(ratio) > 1:
            return False
    return True


# -- (a) reduces to lag-sticky ------------------------------------------------------------------


@given(case=cases())
def test_equal_rates_and_no_producers_give_exactly_lag_stickys_plan(case) -> None:  # type: ignore[no-untyped-def]
    lags, subs, _, _ = case
    equal = dict.fromkeys(subs, 123.0)
    expected = sla.assign(lags, subs, "lag-sticky")
    pd.testing.assert_frame_equal(plan(lags, subs, equal, None), expected)
    pd.testing.assert_frame_equal(plan(lags, subs, None, None), expected)
    zero = pd.DataFrame({"topic": lags["topic"], "partition": lags["partition"], "produce_rate": 0.0})
    pd.testing.assert_frame_equal(plan(lags, subs, equal, zero), expected)


def test_margin_is_lag_stickys_tolerance_when_it_reduces() -> None:
    lags = pd.DataFrame({"topic": "t", "partition": range(9), "lag": [90, 80, 70, 60, 50, 40, 30, 20, 10]})
    subs = {c: ["t"] for c in "abc"}
    pd.testing.assert_frame_equal(
        sla.assign(lags, subs, "drain", margin=0.0), sla.assign(lags, subs, "lag-sticky", tolerance=0.0)
    )


# -- (b), (c), (e): the properties with rates ---------------------------------------------------


@given(case=cases())
def test_with_rates_valid_deterministic_balanced_and_never_slower_than_lag_sticky(case) -> None:  # type: ignore[no-untyped-def]
    lags, subs, read, produced = case
    out = plan(lags, subs, read, produced)
    pd.testing.assert_frame_equal(plan(lags.iloc[::-1], subs, dict(reversed(read.items())), produced.iloc[::-1]), out)
    # lag-sticky's counts (both spreads <= 1), or the same per unit of speed
    assert any(spreads_ok(out, subs, units) for units in (dict.fromkeys(subs, 1), shares(read)))
    mine = drains_in(lags, out, read, produced)
    if len(set(shares(read).values())) == 1:  # lag-sticky's counts are drain's: never slower than its plan
        theirs = drains_in(lags, sla.assign(lags, subs, "lag-sticky"), read, produced)
        assert mine <= theirs * (1 + 1e-9) or (math.isinf(mine) and math.isinf(theirs))
    # finite wherever a strategy that splits each topic evenly among its readers drains (KIP-54's
    # sticky does not: it can leave a topic to one of its readers, which drain's counts forbid)
    even = [s for s in sla.STRATEGIES if s not in ("drain", "sticky")]
    if any(math.isfinite(drains_in(lags, sla.assign(lags, subs, s), read, produced)) for s in even):
        assert math.isfinite(mine)


def test_equal_shares_take_lag_stickys_plan_as_it_is_when_no_plan_can_be_a_quarter_margin_faster() -> None:
    from spark_lag_assign.testing import workloads

    lags, subs = workloads.skewed(seed=2)
    read = dict.fromkeys(subs, 100.0)
    even = pd.DataFrame({"topic": lags["topic"], "partition": lags["partition"], "produce_rate": 1e-6})
    lag_sticky = sla.assign(lags, subs, "lag-sticky", tolerance=0.05)
    d = draintime.simulate(lags, lag_sticky, read, even, consumers=list(subs))
    assert d.time_to_drain <= d.lower_bound * (1 + 0.05 / 4)  # the premise: lag-sticky is that close
    pd.testing.assert_frame_equal(plan(lags, subs, read, even), lag_sticky)
    # producers on a few partitions: lag-sticky ignores them, drain starts from its plan and beats it
    hot = even.copy()
    hot.loc[hot.index[:: max(len(hot) // 6, 1)], "produce_rate"] = 60.0
    mine, theirs = plan(lags, subs, read, hot), sla.assign(lags, subs, "lag-sticky", tolerance=0.05)
    assert drains_in(lags, mine, read, hot) < drains_in(lags, theirs, read, hot)
    assert spreads_ok(mine, subs, dict.fromkeys(subs, 1))


def test_the_docstring_example() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": range(4), "lag": [600, 300, 300, 0]})
    subs = {"C0": ["t0"], "C1": ["t0"]}
    read = {"C0": 200.0, "C1": 100.0}
    out = plan(lags, subs, read, None)
    # C0 counts as two readers, so it may hold three partitions to C1's one
    assert {(c, p) for c, p in zip(out["consumer"], out["partition"])} == {("C0", 0), ("C0", 1), ("C0", 3), ("C1", 2)}
    assert drains_in(lags, out, read, None) == pytest.approx(4.5)
    assert drains_in(lags, sla.assign(lags, subs, "lag-sticky"), read, None) == pytest.approx(6.0)


def test_half_the_pipelines_twice_as_fast_at_sixty_percent_load_drains_near_the_bound() -> None:
    from spark_lag_assign.testing import workloads

    lags, subs = workloads.skewed(seed=3)
    names = sorted(subs)
    read = {c: 100.0 * (2 if i >= len(names) // 2 else 1) for i, c in enumerate(names)}
    rng = np.random.default_rng(3)
    share = rng.gamma(4.0, 1.0, size=len(lags))
    produce = np.minimum(0.6 * sum(read.values()) * share / share.sum(), 50.0)
    produced = pd.DataFrame({"topic": lags["topic"], "partition": lags["partition"], "produce_rate": produce})
    out = plan(lags, subs, read, produced)
    d = draintime.simulate(lags, out, read, produced, consumers=names)
    assert d.time_to_drain <= 1.25 * d.lower_bound
    assert math.isinf(drains_in(lags, sla.assign(lags, subs, "lag-sticky"), read, produced)) or (
        drains_in(lags, sla.assign(lags, subs, "lag-sticky"), read, produced) > d.time_to_drain
    )


def test_counts_relax_to_each_pipelines_share_of_speed_only_where_the_rates_differ() -> None:
    from spark_lag_assign.testing import workloads

    lags, subs = workloads.skewed(seed=1)
    names = sorted(subs)
    fast = set(names[len(names) // 2 :])
    doubled = {c: 200.0 if c in fast else 100.0 for c in names}
    out = plan(lags, subs, doubled, None)
    counts = out.groupby("consumer").size()
    # the 2x pipelines take about twice the partitions: far beyond a count spread of one,
    # but within one per unit of speed, per topic and over the group
    assert counts[sorted(fast)].min() > 1.5 * counts.drop(sorted(fast)).max()
    assert spreads_ok(out, subs, shares(doubled)) and not spreads_ok(out, subs, dict.fromkeys(subs, 1))
    assert drains_in(lags, out, doubled, None) < drains_in(lags, sla.assign(lags, subs, "lag-sticky"), doubled, None)
    # rates that round to the same share (1.0 and 1.3) keep lag-sticky's counts
    close = {c: 130.0 if c in fast else 100.0 for c in names}
    assert spreads_ok(plan(lags, subs, close, None), subs, dict.fromkeys(subs, 1))
    assert shares(close) == dict.fromkeys(names, 1)


# -- (c) loud when nobody can keep up -----------------------------------------------------------


def test_a_partition_hotter_than_any_reader_makes_a_plan_and_names_who_cannot_keep_up() -> None:
    lags = pd.DataFrame({"topic": "t", "partition": range(4), "lag": [10, 10, 10, 10]})
    subs = {"a": ["t"], "b": ["t"]}
    read = {"a": 100.0, "b": 100.0}
    produced = pd.DataFrame({"topic": "t", "partition": range(4), "produce_rate": [150.0, 1.0, 1.0, 1.0]})
    out = plan(lags, subs, read, produced)
    names = ["a", "b"]
    owner = pd.Index(names).get_indexer(out["consumer"])
    stuck = drain.cannot_keep_up(
        owner, out["lag"].to_numpy(), rates.align_produce(produced, out["topic"], out["partition"]), np.array([100.0, 100.0])
    )
    hot = out.loc[out["partition"] == 0, "consumer"].item()
    assert [names[i] for i in stuck] == [hot]
    assert math.isinf(rates.lower_bound(lags["lag"].to_numpy(), produced["produce_rate"].to_numpy(), np.array([100.0, 100.0])))


# -- (d) stickiness -----------------------------------------------------------------------------


def test_a_previous_plan_within_the_margin_is_kept_and_one_beyond_it_is_not() -> None:
    lags = pd.DataFrame({"topic": "t", "partition": range(10), "lag": [1000 + 40 * i for i in range(10)]})
    subs = {"a": ["t"], "b": ["t"]}
    read = {"a": 100.0, "b": 200.0}
    best = plan(lags, subs, read, None)
    t_best = drains_in(lags, best, read, None)
    previous = best.loc[:, ["consumer", "topic", "partition"]]
    # swap two partitions whose lags differ a little: the plan gets slightly slower, within 5%
    owner = dict(zip(best["partition"], best["consumer"]))
    candidates = []
    for x in range(10):
        for y in range(10):
            if owner[x] == "a" and owner[y] == "b":
                swapped = previous.assign(consumer=previous["partition"].map({**owner, x: "b", y: "a"}))
                t = drains_in(lags, swapped.assign(lag=lags["lag"]), read, None)
                candidates.append((t / t_best, swapped))
    close = [s for r, s in candidates if 1.0 < r <= 1.04]
    # the slow consumer holding the five heaviest: far beyond the margin
    far = [previous.assign(consumer=np.where(previous["partition"] >= 5, "a", "b"))]
    assert close and drains_in(lags, far[0], read, None) > 1.10 * t_best
    for prev in close:
        kept = plan(lags, subs, read, None, prev)
        assert dict(zip(kept["partition"], kept["consumer"])) == dict(zip(prev["partition"], prev["consumer"]))
    for prev in far:
        moved = plan(lags, subs, read, None, prev)
        assert drains_in(lags, moved, read, None) <= t_best * 1.05
    # margin 0: any faster plan wins
    assert drains_in(lags, plan(lags, subs, read, None, close[0], margin=0.0), read, None) < drains_in(
        lags, close[0].assign(lag=lags["lag"]), read, None
    )


# -- bad input ----------------------------------------------------------------------------------


GOOD = pd.DataFrame({"topic": "t", "partition": [0, 1], "lag": [5, 7]})


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"read_rates": {"a": 0}}, InputError, "positive"),
        ({"read_rates": {"a": -3, "b": 1}}, InputError, "positive"),
        ({"read_rates": {"a": 1, "b": 1, "ghost": 1}}, InputError, "ghost"),
        ({"read_rates": {"a": 1}}, InputError, "no read rate for consumer(s) b"),
        (
            {
                "read_rates": {"a": 1, "b": 1},
                "produce_rates": pd.DataFrame({"topic": ["t"], "partition": [0], "produce_rate": [-1.0]}),
            },
            InputError,
            "t-0",
        ),
        ({"margin": -1}, StrategyError, "margin"),
        ({"read_rates": [1, 2]}, StrategyError, "read_rates"),
    ],
)
def test_bad_rates_are_one_line_errors(options: dict[str, object], error: type, needle: str) -> None:
    with pytest.raises(error) as err:
        sla.assign(GOOD, {"a": ["t"], "b": ["t"]}, "drain", **options)
    assert needle in str(err.value) and "\n" not in str(err.value)


# -- rates --------------------------------------------------------------------------------------


def test_produce_rates_from_two_observations_reset_a_recreated_partition_to_unknown() -> None:
    earlier = pd.DataFrame({"topic": "t", "partition": [0, 1, 2], "end_offset": [100, 500, 7]})
    later = pd.DataFrame({"topic": "t", "partition": [0, 1, 2, 3], "end_offset": [160, 20, 7, 4]})
    got, notes = rates.produce_between(earlier, later, 30.0)
    assert got["produce_rate"].tolist()[0] == pytest.approx(2.0)
    assert math.isnan(got["produce_rate"].iloc[1]) and got["produce_rate"].iloc[2] == 0.0
    assert math.isnan(got["produce_rate"].iloc[3])
    assert any("t-1" in n and "went back" in n for n in notes) and any("1 partition(s)" in n for n in notes)
    for bad in (0, -5, float("nan"), "x"):
        with pytest.raises(InputError, match="interval"):
            rates.produce_between(earlier, later, bad)  # type: ignore[arg-type]


def test_read_rates_come_from_commits_and_count_as_speed_only_while_behind() -> None:
    offsets = pd.DataFrame(
        {"topic": "t", "partition": [0, 1, 2], "end_offset": [1000, 1000, 1000], "committed_offset": [100, 200, 300]}
    )
    owners = pd.DataFrame({"consumer": ["a", "a", "b"], "topic": "t", "partition": [0, 1, 2]})
    later = pd.DataFrame(
        {"topic": "t", "partition": [0, 1, 2], "end_offset": [1000, 1000, 1300], "committed_offset": [400, 500, 1300]}
    )
    read, behind, _ = rates.read_between(rates.Observation(0.0, offsets, owners), later, 10.0)
    assert read == {"a": pytest.approx(60.0), "b": pytest.approx(100.0)}
    assert behind == {"a": True, "b": False}
    got = rates.combine(["a", "b", "c"], configured={"b": 150.0, "a": 10.0}, measured=read, behind=behind)
    assert got.read == {"a": 60.0, "b": 150.0}
    assert got.read_source == {"a": "measured", "b": "configured"}
    assert got.source == "measured+configured" and got.estimated


def test_configured_rates_refuse_unknown_consumers_and_bad_numbers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert rates.configured_rates(["a", "b"], 5) == {"a": 5.0, "b": 5.0}
    assert rates.configured_rates(["a", "b"], 5, {"b": 9}) == {"a": 5.0, "b": 9.0}
    with pytest.raises(InputError, match="ghost"):
        rates.configured_rates(["a"], None, {"ghost": 1})
    for bad in (0, -1, "fast", float("inf"), True):
        with pytest.raises(InputError):
            rates.configured_rates(["a"], bad)
    csv_file = tmp_path / "r.csv"
    csv_file.write_text("consumer,records_per_second\na,100\nb,250.5\n")
    assert rates.read_rates_file(csv_file) == {"a": 100.0, "b": 250.5}
    json_file = tmp_path / "r.json"
    json_file.write_text('[{"consumer": "a", "records_per_second": 3}]')
    assert rates.read_rates_file(json_file) == {"a": 3.0}
    json_file.write_text('{"a": 0}')
    with pytest.raises(InputError, match="positive"):
        rates.read_rates_file(json_file)
    csv_file.write_text("consumer,records_per_second\na,1\na,2\n")
    with pytest.raises(InputError, match="twice"):
        rates.read_rates_file(csv_file)


def test_drain_seconds_and_the_bound_follow_the_fluid_model() -> None:
    got = rates.drain_seconds(
        np.array([100.0, 0.0, 0.0, 10.0, 10.0]), np.array([50.0, 5.0, 20.0, 10.0, 0.0]), np.array([100.0, 10.0, 10.0, 10.0, 5.0])
    )
    assert got.tolist() == [2.0, 0.0, math.inf, math.inf, 2.0]
    assert rates.lower_bound(np.array([100.0, 50.0]), np.array([10.0, 0.0]), np.array([40.0, 40.0])) == pytest.approx(
        max(150 / 70, 100 / 30)
    )


@pytest.mark.parametrize("seed", range(6))
def test_lag_stickys_plan_as_the_search_state_is_what_the_sticky_placement_makes_of_it(seed: int) -> None:
    from spark_lag_assign.assignors import engine, lagsticky, problem
    from spark_lag_assign.testing import workloads

    lags, subs = workloads.skewed(seed=seed)
    if seed % 2:  # differing subscriptions: every consumer reads the first topic and some others
        topics = sorted(set(lags["topic"]))
        rng = np.random.default_rng(seed)
        subs = {c: sorted({topics[0], *rng.choice(topics, size=len(topics) // 2).tolist()}) for c in subs}
    prob = problem(lags, subs, "lag-sticky")
    plain = lagsticky.assign_codes(prob)
    group = engine.build_group(prob, list(prob.consumers), weights=np.asarray(prob.lags, dtype=np.int64) * 3 + 7)
    restored = engine.State.begin(group, plain)
    engine.distribute(group, restored, sticky=True)
    placed = drain._placed(group, plain)
    for field in ("owner", "load", "count", "extra"):
        np.testing.assert_array_equal(getattr(placed, field), getattr(restored, field), err_msg=field)


@given(case=cases(), shuffle=st.randoms(use_true_random=False), extra=st.booleans())
def test_produce_rates_line_up_with_the_rows_as_a_merge_on_topic_and_partition_does(case, shuffle, extra) -> None:  # type: ignore[no-untyped-def]
    from spark_lag_assign.assignors import problem

    lags, subs, _, produced = case
    frame = produced.sample(frac=1.0, random_state=shuffle.randint(0, 2**31))
    if extra:  # unknown topics, a partition given twice (the first counts), a negative rate
        frame = pd.concat(
            [
                frame,
                pd.DataFrame(
                    {
                        "topic": ["nope", lags["topic"].iloc[0]],
                        "partition": [0, int(lags["partition"].iloc[0])],
                        "produce_rate": [5.0, -1.0],
                    }
                ),
            ],
            ignore_index=True,
        )
    prob = problem(lags, subs, "drain")
    # the merge rates.align_produce once was: the reference
    rows = pd.DataFrame({"topic": np.asarray(prob.topics, dtype=object), "partition": prob.partitions})
    given = frame.loc[:, ["topic", "partition", "produce_rate"]].drop_duplicates(["topic", "partition"])
    got = rows.merge(given.astype({"partition": np.int64}), on=["topic", "partition"], how="left")["produce_rate"].to_numpy(
        dtype=float
    )
    expected = np.where(np.isfinite(got) & (got > 0), got, 0.0)
    np.testing.assert_array_equal(rates.align_produce(frame, prob.topics, prob.partitions), expected)
    codes = prob.codes()
    by_code = rates.produce_by_code(frame, codes.index.topic_codes(frame["topic"]), codes.row_topic, prob.partitions)
    np.testing.assert_array_equal(by_code, expected)
