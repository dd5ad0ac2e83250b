"""Sizing for a deadline: equal to a brute force over every subset size with ``drain``, on small
groups; the worked example; producers that outrun the group; durations; sized from the previous
plan the run publishes from; subscriptions that differ, against every subset."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from spark_lag_assign import assign, cli
from spark_lag_assign.config import parse_duration
from spark_lag_assign.errors import ConfigError
from spark_lag_assign.sizing import drain_plan, makespan, order, size


def brute_force(
    lags: pd.DataFrame, subs: dict[str, list[str]], read: dict[str, float], deadline: float, produce: pd.DataFrame | None
) -> int | None:
    """Every size from one up, the fastest pipelines (ties by id), each planned with drain and
    played forward with its own arithmetic: the first size that drains by the deadline."""
    ranked = sorted(read, key=lambda c: (-read[c], c))
    for n in range(1, len(ranked) + 1):
        chosen = ranked[:n]
        options: dict[str, object] = {"read_rates": {c: read[c] for c in chosen}}
        if produce is not None:
            options["produce_rates"] = produce
        plan = assign(lags, {c: subs[c] for c in chosen}, "drain", **options)
        worst = 0.0
        for c in chosen:
            mine = plan[plan["consumer"] == c]
            lag = float(mine["lag"].sum())
            p = 0.0 if produce is None else float(mine.merge(produce, on=["topic", "partition"])["produce_rate"].sum())
            spare = read[c] - p
            t = 0.0 if lag == 0 and spare >= 0 else (lag / spare if spare > 0 else math.inf)
            worst = max(worst, t)
        if worst <= deadline:
            return n
    return None


@st.composite
def groups(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, float], pd.DataFrame | None, float]:
    partitions = draw(st.integers(1, 8))
    lags = pd.DataFrame(
        {
            "topic": "t0",
            "partition": range(partitions),
            "lag": draw(st.lists(st.integers(0, 5_000), min_size=partitions, max_size=partitions)),
        }
    )
    consumers = draw(st.integers(1, 5))
    read = {f"c{i}": float(draw(st.sampled_from([50, 100, 100, 200, 300]))) for i in range(consumers)}
    produce = None
    if draw(st.booleans()):
        produce = pd.DataFrame(
            {
                "topic": "t0",
                "partition": range(partitions),
                "produce_rate": draw(st.lists(st.sampled_from([0.0, 5.0, 20.0, 60.0]), min_size=partitions, max_size=partitions)),
            }
        )
    if draw(st.booleans()):
        deadline = float(draw(st.sampled_from([1, 5, 10, 20, 40, 80, 200])))
    else:
        # near what the k fastest could do on capacity alone: the sizes where the answer turns
        # (a fixed deadline mostly asks for one pipeline or for none)
        k = draw(st.integers(min(2, consumers), consumers))
        spare = sum(sorted(read.values(), reverse=True)[:k]) - (0.0 if produce is None else float(produce["produce_rate"].sum()))
        slack = draw(st.sampled_from([0.95, 1.05, 1.3, 2.0]))
        deadline = max(1.0, float(lags["lag"].sum()) / max(spare, 1.0) * slack)
    return lags, read, produce, deadline


# the brute force plans every size: half the profile's examples (100 under ci); the deadlines
# near the turning sizes make them count (27 of the 100 ask for two or more pipelines, where the
# fixed deadlines alone gave 12 of 200)
@settings(max_examples=max(1, settings().max_examples // 2))
@given(groups())
def test_the_answer_equals_a_brute_force_over_every_size(
    group: tuple[pd.DataFrame, dict[str, float], pd.DataFrame | None, float],
) -> None:
    lags, read, produce, deadline = group
    subs = {c: ["t0"] for c in read}
    got = size(lags, subs, read, deadline, produce)
    assert got.needed == brute_force(lags, subs, read, deadline, produce)
    if got.needed is not None:
        assert got.pipelines == tuple(order(read)[: got.needed])
        assert got.drain_needed is not None and got.drain_needed <= deadline
        assert got.bound is not None and got.bound <= got.needed  # capacity alone never asks for more


def test_the_worked_example() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": [0, 1, 2], "lag": [600, 300, 300]})
    subs = {c: ["t0"] for c in "ABC"}
    got = size(lags, subs, {"A": 100, "B": 200, "C": 100}, 5.0)
    assert (got.needed, got.pipelines, got.drain_needed, got.drain_configured, got.bound) == (2, ("B", "A"), 4.5, 3.0, 2)
    assert got.describe() == (
        "drain within 5.0 s: 2 pipeline(s) needed (B, A), draining in 4.5 s; 3 configured pipeline(s) drain in 3.0 s"
    )


def test_pinned_pipelines_come_first_whatever_their_speed() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": [0, 1, 2], "lag": [600, 300, 300]})
    subs = {c: ["t0"] for c in "ABC"}
    got = size(lags, subs, {"A": 100, "B": 200, "C": 100}, 5.0, pinned=["C"])
    assert got.pipelines[0] == "C" and got.needed == 2 and got.pipelines == ("C", "B")


def test_producers_outrunning_the_group_are_said_with_by_how_much() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": [0, 1], "lag": [10, 10]})
    produce = pd.DataFrame({"topic": "t0", "partition": [0, 1], "produce_rate": [150.0, 100.0]})
    got = size(lags, {"A": ["t0"], "B": ["t0"]}, {"A": 100, "B": 100}, 3600.0, produce)
    assert (got.needed, got.outrun, math.isinf(got.drain_configured)) == (None, 50.0, True)
    assert "producers append 50.0 records/s more than all of them read" in got.describe()
    assert got.as_json()["drain_seconds_configured"] is None and got.as_json()["produce_excess"] == 50.0


def test_a_topic_no_chosen_pipeline_reads_never_drains() -> None:
    lags = pd.DataFrame({"topic": ["a", "b"], "partition": [0, 0], "lag": [100, 100]})
    subs = {"fast": ["a"], "slow": ["b"]}
    got = size(lags, subs, {"fast": 1000, "slow": 10}, 20.0)
    assert (got.needed, got.pipelines) == (2, ("fast", "slow"))  # fast alone leaves b unread
    plan = assign(lags, subs, "drain", read_rates={"fast": 1000, "slow": 10})
    assert makespan(plan, {"fast": 1000, "slow": 10}, None) == 10.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("45m", 2700), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("3600", 3600), (120, 120)]
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["-5m", "soon", "0", "1h30", "", "5 m x", "inf", True])
def test_bad_durations_are_one_line(text: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_duration(text, "--drain-within")
    assert str(caught.value).startswith("--drain-within: ") and "\n" not in str(caught.value)


def test_simulate_answers_the_deadline_question_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offsets = tmp_path / "now.csv"
    offsets.write_text("topic,partition,beginning_offset,end_offset,committed_offset\nt0,0,0,600,0\nt0,1,0,300,0\nt0,2,0,300,0\n")
    rates = tmp_path / "rates.csv"
    rates.write_text("consumer,records_per_second\nA,100\nB,200\nC,100\n")
    common = ["simulate", "--offsets", str(offsets), "--consumers", "A,B,C", "--rates", str(rates), "--strategies", "drain"]
    assert cli.main([*common, "--drain-within", "5s"]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == (
        "drain within 5.0 s: 2 pipeline(s) needed (B, A), draining in 4.5 s; 3 configured pipeline(s) drain in 3.0 s"
    )
    assert cli.main([*common, "--drain-within=-1m"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "spark-lag-assign: error: --drain-within: '-1m' is negative: a deadline is a time from now (e.g. 45m)"
    assert cli.main([*common, "--drain-within", "5s", "--pinned", "Z"]) == 1
    assert capsys.readouterr().err.strip() == "spark-lag-assign: error: --pinned: pinned pipeline(s) not in the group: Z"


@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_a_negative_deadline_after_a_space_is_the_deadline_s_one_line_and_exit_1(tmp_path: Path, command: str) -> None:
    """``--drain-within -5m``: argparse would take ``-5m`` for a flag (exit 2, "expected one
    argument"); it reaches the deadline's own check, as ``--drain-within=-5m`` does. Run as the
    console script runs, in a process of its own, with its real exit status and stderr."""
    offsets = tmp_path / "now.csv"
    offsets.write_text("topic,partition,beginning_offset,end_offset,committed_offset\nt0,0,0,600,0\n")
    args = [command, "--offsets", str(offsets), "--consumers", "A,B", "--rate", "100"]
    args += ["--output", str(tmp_path / "plans")] if command == "plan" else []
    child = "import sys\nfrom spark_lag_assign import cli\nsys.exit(cli.main(sys.argv[1:]))\n"
    repo = Path(__file__).resolve().parents[2]

    def cli_run(*more: str) -> tuple[int, str]:
        done = subprocess.run(
            [sys.executable, "-c", child, *args, *more], capture_output=True, text=True, cwd=repo, timeout=300, check=False
        )
        return done.returncode, done.stderr.strip()

    negative = "spark-lag-assign: error: --drain-within: '-5m' is negative: a deadline is a time from now (e.g. 45m)"
    assert cli_run("--drain-within", "-5m") == (1, negative)
    assert cli_run("--drain-within", "-1h30m") == (1, negative.replace("'-5m'", "'-1h30m'"))
    # a flag where the value belongs is still argparse's usage mistake
    code, err = cli_run("--drain-within", "--pinned", "A")
    assert code == 2 and err.startswith("spark-lag-assign: error: argument --drain-within: expected one argument")
    assert not (tmp_path / "plans").exists()


@pytest.mark.parametrize("seed", range(6))
def test_on_small_bench_like_groups_the_answer_is_within_one_pipeline_of_the_capacity_bound(seed: int) -> None:
    """``make bench``'s sizing workloads (tests/bench/sizing_bench.py) made small: skewed lags on
    6 pipelines, equal or 2x-apart rates, producers at 20% and 60% of capacity, deadlines 1.25x to
    4x the whole group's lower bound. Where some number of the 6 drains in time, it is never
    below the capacity bound and at most one above (seed 3 has cases at +1); where none does
    (seed 3, equal rates, 60%, 1.25x), the bound asks for all 6, so the answer (7 or more) is
    not known to break "within one" from this group."""
    from spark_lag_assign.testing import workloads
    from tests.bench import drain as drain_bench, rates_bench, sizing_bench

    gaps = []
    for speeds in rates_bench.SPEEDS:
        for load in (0.2, 0.6):
            lags, subs = workloads.skewed(topics=8, consumers=6, max_partitions=12, seed=seed)
            rates = rates_bench.read_rates(list(subs), drain_bench.consumer_rate(lags, len(subs)), speeds)
            produced = rates_bench.produce_rates(lags, sum(rates.values()), min(rates.values()), load, seed)
            for factor in (1.25, 2.0, 4.0):
                deadline = factor * sizing_bench.bound_time(lags, rates, produced)
                got = size(lags, subs, rates, deadline, produced)
                bound = sizing_bench.capacity_bound(lags, rates, produced, deadline)
                assert bound is not None and got.bound == bound
                if got.needed is None:
                    assert bound == got.configured and got.drain_configured > deadline
                    continue
                assert got.drain_needed is not None and got.drain_needed <= deadline
                gaps.append(got.needed - bound)
    assert len(gaps) >= 11 and min(gaps) >= 0 and max(gaps) <= 1, gaps


# -- the previous plan: sized as it is published ---------------------------------------------

# found by a search over seeded single-topic groups with a previous plan of four pipelines
# (seed 299 of 400; 4 of them missed their deadline, by up to 1.12x, when sized from scratch)
PREVIOUS_LAGS = [3559, 768, 1912, 1375, 140, 1360, 3598, 3469, 3171, 1814]
PREVIOUS_READ = {"c0": 200.0, "c1": 50.0, "c2": 50.0, "c3": 50.0}


def drained_from(lags: pd.DataFrame, previous: pd.DataFrame, pipelines: tuple[str, ...]) -> float:
    """The time of drain's plan for ``pipelines`` made from ``previous``, as the job publishes it."""
    read = {c: PREVIOUS_READ[c] for c in pipelines}
    return makespan(assign(lags, {c: ["t0"] for c in pipelines}, "drain", previous=previous, read_rates=read), read, None)


def test_the_job_sizes_with_the_previous_plan_it_publishes_from(tmp_path: Path) -> None:
    from spark_lag_assign import config
    from spark_lag_assign.core.rates import Rates
    from spark_lag_assign.spark import job

    lags = pd.DataFrame({"topic": "t0", "partition": range(len(PREVIOUS_LAGS)), "lag": PREVIOUS_LAGS})
    subs = {c: ["t0"] for c in PREVIOUS_READ}
    previous = assign(lags, subs, "lag-sticky").loc[:, ["consumer", "topic", "partition"]]  # the generation before
    # from scratch three pipelines drain in 71.18 s; but drain keeps the previous owners unless it
    # finds a plan more than its margin (5%) sooner, and from the previous plan those three take 77.32 s
    scratch = size(lags, subs, PREVIOUS_READ, 75.0)
    assert scratch.needed == 3 and scratch.drain_needed == pytest.approx(71.18)
    assert drained_from(lags, previous, scratch.pipelines) == pytest.approx(77.32)

    snapshot = tmp_path / "now.csv"
    snapshot.write_text(
        "topic,partition,beginning_offset,end_offset,committed_offset\n"
        + "".join(f"t0,{p},0,{lag},0\n" for p, lag in enumerate(PREVIOUS_LAGS))
    )
    settings = config.settings(
        offsets=str(snapshot), consumers=",".join(PREVIOUS_READ), strategy="drain", output=str(tmp_path / "plans"),
        drain_within="75s", size_to_deadline=True,
    )  # fmt: skip
    known = Rates(dict(PREVIOUS_READ), dict.fromkeys(PREVIOUS_READ, "configured"), None, 1)
    got = job._size(settings, job.extract_offsets(settings), subs, known, previous)
    assert got is not None and (got.needed, got.pipelines) == (4, ("c0", "c1", "c2", "c3"))
    # what sizing says is what the published plan does
    assert got.drain_needed is not None
    assert got.drain_needed == pytest.approx(drained_from(lags, previous, got.pipelines)) and got.drain_needed <= 75.0
    assert got.drain_configured == got.drain_needed


@pytest.mark.parametrize("seed", range(40))
def test_sizing_from_a_previous_plan_promises_what_drain_then_plans(seed: int) -> None:
    """Random single-topic groups with a previous plan of four: the answer's drain plan made from
    that plan (as ``--size-to-deadline`` publishes it) drains by the deadline, in the time said."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    lags = pd.DataFrame({"topic": "t0", "partition": range(n), "lag": rng.integers(0, 5_000, n)})
    read = {f"c{i}": float(rng.choice([50, 100, 200, 300])) for i in range(int(rng.integers(2, 6)))}
    subs = {c: ["t0"] for c in read}
    previous = assign(lags, {f"c{i}": ["t0"] for i in range(4)}, "lag-sticky")
    for slack in (0.95, 1.05, 1.3, 2.0):
        deadline = max(1.0, float(lags["lag"].sum()) / sum(sorted(read.values(), reverse=True)[: max(1, len(read) // 2)]) * slack)
        got = size(lags, subs, read, deadline, previous=previous)
        if got.needed is None:
            continue
        chosen = {c: read[c] for c in got.pipelines}
        plan = assign(lags, {c: subs[c] for c in chosen}, "drain", previous=previous, read_rates=chosen)
        assert got.drain_needed is not None
        assert makespan(plan, chosen, None) == got.drain_needed <= deadline


# -- subscriptions that differ -------------------------------------------------------------------


def every_subset(lags: pd.DataFrame, subs: dict[str, list[str]], read: dict[str, float], deadline: float) -> int | None:
    """The fewest pipelines of any choice whose drain plan drains by the deadline."""
    for n in range(1, len(subs) + 1):
        for chosen in itertools.combinations(sorted(subs), n):
            if drain_plan(lags, subs, chosen, read, None)[1] <= deadline:
                return n
    return None


def fastest_prefix(lags: pd.DataFrame, subs: dict[str, list[str]], read: dict[str, float], deadline: float) -> int | None:
    """The first n fastest, each size as it is: the rule before topics were made to be read."""
    ranked = order(read)
    return next((n for n in range(1, len(ranked) + 1) if drain_plan(lags, subs, ranked[:n], read, None)[1] <= deadline), None)


def test_a_topic_only_a_slow_pipeline_reads_takes_it_in_place_of_a_fast_one() -> None:
    lags = pd.DataFrame({"topic": ["t0", "t0", "t1"], "partition": [0, 1, 0], "lag": [5_000, 5_000, 100]})
    subs = {"A": ["t0"], "B": ["t0"], "C": ["t1"]}
    read = {"A": 1_000.0, "B": 1_000.0, "C": 100.0}
    got = size(lags, subs, read, 10.0)
    assert (got.needed, got.pipelines, got.drain_needed) == (2, ("A", "C"), 10.0)  # not all three
    assert fastest_prefix(lags, subs, read, 10.0) == 3


def test_the_limit_a_smaller_choice_that_is_not_the_fastest() -> None:
    """The README's limit: A (t0) and B (t1) are the fastest, C reads both, slower; C alone
    drains in time, but the answer is made of the fastest pipelines, so it is two."""
    lags = pd.DataFrame({"topic": ["t0", "t1"], "partition": [0, 0], "lag": [400, 400]})
    subs = {"A": ["t0"], "B": ["t1"], "C": ["t0", "t1"]}
    read = {"A": 1_000.0, "B": 1_000.0, "C": 900.0}
    assert (size(lags, subs, read, 1.0).needed, every_subset(lags, subs, read, 1.0)) == (2, 1)


def test_with_mixed_subscriptions_never_above_the_fastest_prefix_nor_below_every_subset() -> None:
    """Small groups (1-3 topics, 2-5 pipelines, each reading some of the topics), planned for every
    subset of every size: the answer drains in the time it says, is never more pipelines than
    the fastest-first prefix (the rule before) and never fewer than the best subset; on these 150
    it was the best subset's in all but one when written (README: 296 of 300)."""
    agree = total = 0
    for seed in range(150):
        rng = np.random.default_rng(seed)
        topics = [f"t{i}" for i in range(int(rng.integers(1, 4)))]
        rows = [(t, p, int(rng.integers(0, 3_000))) for t in topics for p in range(int(rng.integers(1, 4)))]
        read = {f"c{i}": float(rng.choice([50, 100, 200, 1_000])) for i in range(int(rng.integers(2, 6)))}
        subs = {c: sorted(rng.choice(topics, size=int(rng.integers(1, len(topics) + 1)), replace=False).tolist()) for c in read}
        read_topics = {t for ts in subs.values() for t in ts}
        lags = pd.DataFrame([r for r in rows if r[0] in read_topics], columns=["topic", "partition", "lag"])
        deadline = float(rng.choice([2, 5, 10, 20, 40]))
        got = size(lags, subs, read, deadline)
        if got.needed is not None:
            assert got.drain_needed == drain_plan(lags, subs, got.pipelines, read, None)[1] <= deadline
            assert len(got.pipelines) == got.needed
        never = len(subs) + 1
        best, before = every_subset(lags, subs, read, deadline), fastest_prefix(lags, subs, read, deadline)
        answer = never if got.needed is None else got.needed
        assert (never if best is None else best) <= answer <= (never if before is None else before), seed
        agree += answer == (never if best is None else best)
        total += 1
    assert agree >= total - 2, (agree, total)
