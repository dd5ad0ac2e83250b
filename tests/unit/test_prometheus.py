"""The metrics' names and the group assignors' metrics, parsed with prometheus_client's own
parser; the Grafana dashboard queries only metrics the code exports; a failing metric never
raises into a pipeline."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from spark_lag_assign.consume.report import FollowerReport
from spark_lag_assign.group import LagAssignor, StaticLags
from spark_lag_assign.group.simulate import SimulatedGroup
from spark_lag_assign.metrics import PREFIX, FollowerMetrics, GroupMetrics, PlannerMetrics, all_registries, metric_names

DASHBOARD = Path(__file__).resolve().parents[2] / "conf" / "grafana-dashboard.json"


def parsed(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_names_follow_prometheus_conventions() -> None:
    families = [f for registry in all_registries() for f in registry.collect()]
    assert len(families) >= 30
    for family in families:
        assert family.name.startswith(PREFIX), family.name
        assert re.fullmatch(r"[a-z_]+", family.name), family.name
        assert family.documentation, family.name
        if family.type == "counter":  # exposed as NAME_total
            assert not family.name.endswith("_total")
        if "duration" in family.name or "age" in family.name or "drain" in family.name or "wait" in family.name:
            assert family.name.endswith("_seconds"), f"{family.name}: times are in seconds, the base unit"
        assert not family.name.endswith(("_ms", "_milliseconds", "_minutes"))
    # no per-partition series: a million partitions would be a million series
    follower = FollowerMetrics("A")
    follower.progress(10, {"t0": 5})
    planner = PlannerMetrics()
    for registry in (follower.registry, planner.registry, GroupMetrics().registry):
        for family in registry.collect():
            for sample in family.samples:
                assert "partition" not in sample.labels, sample


def group_of_two(assignor: type[LagAssignor], **options: Any) -> tuple[SimulatedGroup, LagAssignor]:
    group = SimulatedGroup({"t0": 3})
    leader = assignor(**options)
    group.join("C0", leader, ["t0"])
    group.join("C1", assignor(**options), ["t0"])
    return group, leader


SEED_000 = pd.DataFrame({"topic": "t0", "partition": [0, 1, 2], "lag": [100_000, 50_000, 60_000]})


def test_a_group_assignor_counts_its_rebalances_and_the_snapshot_age() -> None:
    group, leader = group_of_two(LagAssignor, lags=StaticLags(SEED_000, taken=time.monotonic() - 7))
    group.rebalance(leader="C0")
    group.rebalance(leader="C0")
    got = parsed(leader.metrics.registry)
    assert got[("spark_lag_assign_group_rebalances_total", (("assignor", "sla-lag"),))] == 2
    assert 7 <= got[("spark_lag_assign_group_lag_snapshot_age_seconds", (("assignor", "sla-lag"),))] < 600
    assert not [k for k in got if k[0] == "spark_lag_assign_group_count_balance_fallbacks_total"]


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({}, "no-lag-source"),
        ({"lags": StaticLags(SEED_000, taken=time.monotonic() - 1_000)}, "stale-snapshot"),
    ],
)
def test_a_fallback_to_count_balance_is_counted_with_why(options: dict[str, Any], reason: str) -> None:
    group, leader = group_of_two(LagAssignor, **options)
    group.rebalance(leader="C0")
    got = parsed(leader.metrics.registry)
    assert got[("spark_lag_assign_group_count_balance_fallbacks_total", (("assignor", "sla-lag"), ("reason", reason)))] == 1


def test_a_strategy_that_raises_is_counted_as_a_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_lag_assign.group import assignor as module

    def broken(*args: Any, **kwargs: Any) -> Any:
        if args[2] == "roundrobin":
            return original(*args, **kwargs)
        raise RuntimeError("boom")

    original = module.plan_assign
    monkeypatch.setattr(module, "plan_assign", broken)
    group, leader = group_of_two(LagAssignor, lags=StaticLags(SEED_000))
    group.rebalance(leader="C0")
    got = parsed(leader.metrics.registry)
    assert (
        got[("spark_lag_assign_group_count_balance_fallbacks_total", (("assignor", "sla-lag"), ("reason", "strategy-failed")))]
        == 1
    )


def test_a_failing_metric_never_raises_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    metrics = FollowerMetrics("A")

    class Broken:
        def labels(self, *args: Any) -> Any:
            raise RuntimeError("registry gone")

    metrics._records = Broken()  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="spark_lag_assign.metrics"):
        metrics.progress(5, {"t0": 1})
        metrics.progress(5, {"t0": 1})
        metrics.handover(2.0)  # the others still work
    assert [r.getMessage() for r in caplog.records] == [
        "metrics: progress failed (registry gone); going on without it"
    ]
    got = parsed(metrics.registry)
    assert got[("spark_lag_assign_follower_handovers_total", (("consumer", "A"),))] == 1


def test_a_handover_is_timed_from_the_plan_that_moves_partitions_to_the_query_that_reads_them() -> None:
    """Not the first plan (a start), not a plan that takes everything (a stop), and a later plan
    that leaves what is read ends one uncounted: idle hours never count as a handover."""
    now = [0.0]
    report = FollowerReport(FollowerMetrics("A"), clock=lambda: now[0])
    x, y, z = (frozenset({("t0", p)}) for p in range(3))
    steps: list[tuple[float, int | None, frozenset[tuple[str, int]], frozenset[tuple[str, int]]]] = [
        (0.0, 1, x, frozenset()),  # its first plan: a start
        (1.0, None, x, x),  # the query starts
        (10.0, 2, y, x),  # y instead of x: a handover begins
        (12.0, None, y, y),  # reading y: it took 2 s
        (20.0, 3, frozenset(), y),  # nothing left: a stop
        (10_000.0, 4, z, frozenset()),  # idle hours, then z: a handover begins here
        (10_003.0, None, z, z),  # 3 s
        (20_000.0, 5, x, z),  # x instead of z ...
        (20_001.0, 6, z, z),  # ... and back to what it reads before it stopped: none
        (30_000.0, None, z, z),  # a query restarted under the same partitions
        (30_001.0, 7, x | z, z),  # x as well: a handover begins ...
        (30_002.0, 8, z, z),  # ... and the next plan takes x back: none
        (40_000.0, 9, x, z | x),  # reading both, it keeps x alone: fewer is no handover ...
        (40_010.0, None, x, x),  # ... so the query's restart under fewer counts none
    ]
    for at, generation, new, reads in steps:
        now[0] = at
        if generation is None:
            report.started()
        else:
            report.saw_plan(None, generation, new, reads, first=generation == 1)
    got = parsed(report.metrics.registry)
    assert got[(f"{PREFIX}follower_handovers_total", (("consumer", "A"),))] == 2
    assert got[(f"{PREFIX}follower_handover_duration_seconds_sum", (("consumer", "A"),))] == 5.0


def test_a_planner_run_exports_what_it_found_out_and_no_made_up_zero() -> None:
    """A failed run: its outcome, its time and its phases, nothing else (a Pushgateway PUT would
    otherwise replace the last plan's lag with 0); a run without rates: no drain time; without
    --drain-within: no sizing."""
    failed = PlannerMetrics()
    failed.record_phases({"extract": 0.5})
    failed.record_outcome("failed", "kafka")
    assert {name for name, _labels in parsed(failed.registry)} == {
        f"{PREFIX}plan_outcome",
        f"{PREFIX}plan_last_run_timestamp_seconds",
        f"{PREFIX}plan_phase_duration_seconds",
    }
    published = PlannerMetrics()
    no_rates = {k: v for k, v in A_PLAN.items() if k != "drain_seconds"}
    no_rates["consumers"] = {c: {"lag": e["lag"], "partitions": e["partitions"]} for c, e in A_PLAN["consumers"].items()}
    published.record_plan(no_rates, {"extract": 1.0})
    published.record_outcome("published")
    names = {name for name, _labels in parsed(published.registry)}
    assert f"{PREFIX}plan_lag_records" in names
    assert not {n for n in names if "drain" in n or "sizing" in n}, names


def test_a_planner_metric_that_fails_does_not_fail_the_run(caplog: pytest.LogCaptureFixture) -> None:
    metrics = PlannerMetrics()
    with caplog.at_level(logging.WARNING, logger="spark_lag_assign.metrics"):
        metrics.record_plan({"generation": 3, "strategy": "lag"}, {"plan": 1.0})  # a plan without its totals
    assert [r.getMessage() for r in caplog.records] == ["metrics: record_plan failed ('totals'); going on without it"]
    metrics.record_outcome("published")
    assert parsed(metrics.registry)[(f"{PREFIX}plan_generation", ())] == 3


def test_the_wait_for_a_blocker_grows_with_the_clock() -> None:
    now = [100.0]
    metrics = FollowerMetrics("B", clock=lambda: now[0])
    metrics.state("waiting", {"Z": 90.0})
    first = parsed(metrics.registry)[("spark_lag_assign_follower_wait_seconds", (("blocker", "Z"), ("consumer", "B")))]
    now[0] = 130.0
    later = parsed(metrics.registry)[("spark_lag_assign_follower_wait_seconds", (("blocker", "Z"), ("consumer", "B")))]
    assert (first, later) == (10.0, 40.0)
    metrics.state("reading")
    assert not [k for k in parsed(metrics.registry) if k[0] == "spark_lag_assign_follower_wait_seconds"]


def test_a_follower_mirrors_the_committers_running_totals_without_counting_twice() -> None:
    """The committer counts commits and failures; the metrics follow its totals, which arrive
    again with every batch, and a total that goes back (a report out of order) is ignored."""
    metrics = FollowerMetrics("A")
    for total, failures in [(3, 1), (3, 1), (5, 1), (4, 2)]:
        metrics.commits(total, failures)
    samples = parsed(metrics.registry)
    assert samples[(f"{PREFIX}follower_commits_total", (("consumer", "A"),))] == 5
    assert samples[(f"{PREFIX}follower_commit_failures_total", (("consumer", "A"),))] == 2


def dashboard_queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in doc["panels"] for t in panel["targets"]]


def test_every_dashboard_query_names_a_metric_the_code_exports() -> None:
    exported = set().union(*(metric_names(r) for r in all_registries()))
    queries = dashboard_queries()
    assert len(queries) >= 15
    used = set()
    for expr in queries:
        names = set(re.findall(r"\bspark_lag_assign_[a-z_]+\b", expr))
        assert names, f"a query that names none of our metrics: {expr}"
        assert names <= exported, f"{expr}: unknown {sorted(names - exported)}"
        used |= names
    # the panels: lag per consumer, time to drain, handovers, waits, refused commits
    for wanted in (
        "spark_lag_assign_plan_consumer_lag_records",
        "spark_lag_assign_plan_drain_seconds",
        "spark_lag_assign_follower_handovers_total",
        "spark_lag_assign_follower_wait_seconds",
        "spark_lag_assign_follower_refused_commits_total",
    ):
        assert wanted in used, wanted


def test_exported_names_include_the_suffixes_a_query_uses() -> None:
    names = metric_names(FollowerMetrics("A").registry)
    assert {
        "spark_lag_assign_follower_handovers_total",
        "spark_lag_assign_follower_handover_duration_seconds_bucket",
        "spark_lag_assign_follower_wait_seconds",
    } <= names
    assert "spark_lag_assign_follower_handovers" not in names


README = DASHBOARD.parents[1] / "README.md"
A_PLAN = {
    "generation": 3, "strategy": "drain", "rates_source": "given", "drain_seconds": 12.5,
    "totals": {"partitions": 4, "unassigned": 1, "lag": 70},
    "quality": {"optimality": 1.1, "count_spread": 1, "topic_spread": 1, "moved": 2},
    "consumers": {"c0": {"lag": 40, "partitions": 2, "drain_seconds": 12.5, "keeps_up": True},
                  "c1": {"lag": 30, "partitions": 2, "drain_seconds": 9.0, "keeps_up": True}},
}  # fmt: skip


def exercised() -> dict[str, tuple[str, frozenset[str]]]:
    """Every family of every emitter, each labelled one with samples: name -> (type, label names)."""
    planner = PlannerMetrics()
    planner.record_plan(A_PLAN, {"extract": 1.0, "plan": 2.0})
    planner.record_sizing(3600.0, 2, 3, 100.0, 200.0, 0.0)
    planner.record_outcome("published")
    follower = FollowerMetrics("A")
    follower.generations(2, 3, 4)
    follower.state("waiting", {"Z": 0.0})
    follower.handover(1.5)
    follower.commits(2, 1)
    follower.refused()
    follower.foreign_commit()
    follower.renewal()
    follower.lapse()
    follower.progress(5, {"t0": 3})
    group = GroupMetrics()
    group.rebalance("sla-lag", 4.0, "no-snapshot")
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for registry in (planner.registry, follower.registry, group.registry):
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            if family.name.endswith("_created"):  # the client's creation time of a counter or histogram
                continue
            labels = frozenset(k for s in family.samples for k in s.labels if k != "le")
            name = f"{family.name}_total" if family.type == "counter" else family.name
            found[name] = (family.type, labels)
    return found


def readme_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    """README's metrics table: name -> (type, label names); "`_x`" abbreviates "`spark_lag_assign_x`"."""
    table: dict[str, tuple[str, frozenset[str]]] = {}
    for row in re.findall(r"^\| `spark_lag_assign_.*$", README.read_text(), re.MULTILINE):
        names, kind, labels = (cell.strip() for cell in row.strip("|").split("|")[:3])
        label_names = frozenset(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", labels)))
        for name in re.findall(r"`(\w+)`", names):
            table[name if name.startswith(PREFIX) else PREFIX + name.lstrip("_")] = (kind, label_names)
    return table


def test_readme_s_table_is_every_metric_with_its_type_and_labels_and_none_is_per_partition() -> None:
    found = exercised()
    assert readme_metrics() == found
    assert not [name for name, (_, labels) in found.items() if "partition" in labels]  # a million series is no dashboard


def test_every_label_a_dashboard_query_uses_is_one_its_metrics_carry() -> None:
    found = exercised()
    for expr in dashboard_queries():
        names = set(re.findall(r"\bspark_lag_assign_[a-z_]+\b", expr))
        # a histogram's series are its name plus _bucket, _sum or _count
        bases = {n if n in found else re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
        assert bases <= set(found), f"{expr}: unknown {sorted(bases - set(found))}"
        carried = {"job", "instance", "le"}.union(*(found[b][1] for b in bases))
        used = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", expr))
        used |= {label.strip() for clause in re.findall(r"\bby\s*\(([^)]*)\)", expr) for label in clause.split(",")}
        assert used <= carried, f"{expr}: labels {sorted(used - carried)} are on none of its metrics"


def test_one_group_metrics_per_registry_shared_by_every_assignor_of_a_process() -> None:
    """Two consumers of one process serving on the process's registry share one GroupMetrics:
    a second on that registry is one ConfigError line saying so, not prometheus_client's
    duplicate-timeseries traceback while the assignors are built."""
    from prometheus_client import CollectorRegistry

    from spark_lag_assign.errors import ConfigError

    shared = CollectorRegistry()
    metrics = GroupMetrics(shared)
    with pytest.raises(ConfigError, match=r"^GroupMetrics: this registry holds the group assignor metrics already"):
        GroupMetrics(shared)
    metrics.rebalance("sla-lag", 1.0, None)
    metrics.rebalance("sla-lag-cooperative", 2.0, "no-snapshot")
    totals = {s.labels["assignor"]: s.value for f in text_string_to_metric_families(generate_latest(shared).decode())
              for s in f.samples if s.name == PREFIX + "group_rebalances_total"}  # fmt: skip
    assert totals == {"sla-lag": 1.0, "sla-lag-cooperative": 1.0}
