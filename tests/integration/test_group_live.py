"""The group assignors in real consumer groups on the local broker.

Members are separate processes running ``jobs/kafka_python_consumer.py`` (the README's
example), each with its own lag monitor; they journal every rebalance-listener call and
every record they read, flushed per line, so a killed member's journal is whole up to its
death. From the journals alone:

- the group's assignment at rest (every partition owned once) and its quality against the
  backlog the test produced;
- ownership intervals (assigned -> revoked / lost / killed): no partition is ever owned by
  two members at once;
- records: every produced record read at least once; a record read twice only by two
  different ownership epochs (that is, around a rebalance), never twice within one.

Session timeouts are the broker's minimum (6 s) so the whole module takes well under two
minutes.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from spark_lag_assign.core.quality import quality
from spark_lag_assign.testing.localkafka import LocalKafka, create_topic, produce

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "kafka_python_consumer.py"
SESSION_MS = 6000  # group.min.session.timeout.ms of the broker
TP = tuple[str, int]

# a skewed backlog on 12 partitions: the first three hold two thirds of it
SKEWED = [1912, 1728, 1375, 690, 619, 310, 277, 261, 223, 210, 68, 68]


class Member:
    """One consumer process of the example job, and its journal."""

    def __init__(self, tmp: Path, kafka: LocalKafka, group: str, topic: str, name: str, *extra: str) -> None:
        self.name = name
        self.journal = tmp / f"{name}.jsonl"
        self.log = tmp / f"{name}.log"
        self.killed_at: float | None = None
        self.stopping = False
        cmd = [
            sys.executable,
            str(JOB),
            "--bootstrap-servers",
            kafka.bootstrap_servers,
            "--group",
            group,
            "--topics",
            topic,
            "--name",
            name,
            "--journal",
            str(self.journal),
            "--reset",
            "earliest",
            "--session-timeout-ms",
            str(SESSION_MS),
            "--heartbeat-interval-ms",
            "500",
            "--max-poll-interval-ms",
            "15000",
            "--max-poll-records",
            "200",
            "--lag-interval-s",
            "1",
            *extra,
        ]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)

    def events(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        out = []
        for line in self.journal.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by SIGKILL
                break
        return out

    def owned(self) -> set[TP]:
        owned: set[TP] = set()
        if self.killed_at is not None or self.stopping or self.proc.poll() is not None:
            return owned
        for e in self.events():
            if e["event"] == "assigned":
                owned |= {(t, p) for t, p in e["partitions"]}
            elif e["event"] in ("revoked", "lost"):
                owned -= {(t, p) for t, p in e["partitions"]}
        return owned

    def kill(self) -> None:
        self.killed_at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.stopping = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def alive(members: list[Member]) -> list[Member]:
    return [m for m in members if m.killed_at is None and not m.stopping and m.proc.poll() is None]


def last_led(members: list[Member]) -> dict[str, Any] | None:
    led = [e for m in members for e in m.events() if e["event"] == "led"]
    return max(led, key=lambda e: e["t"]) if led else None


def wait_stable(members: list[Member], every: set[TP], *, quiet: float = 2.0, timeout: float = 45.0) -> dict[str, set[TP]]:
    """Wait until the live members own every partition once, the last rebalance counted them
    all and left nothing for a next round, and nothing changed for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        for m in members:
            if m.killed_at is None and not m.stopping and m.proc.poll() is not None:
                raise AssertionError(f"{m.name} exited with {m.proc.returncode}: {m.log.read_text()[-3000:]}")
        live = alive(members)
        owned = {m.name: m.owned() for m in live}
        led = last_led(members)
        ok = (
            sum(len(v) for v in owned.values()) == len(every)
            and set().union(*owned.values()) == every
            and led is not None
            and led["members"] == len(live)
            and led["deferred"] == 0
        )
        state = (ok, {k: sorted(v) for k, v in owned.items()}, led and led["t"])
        if state != seen:
            seen, since = state, time.monotonic()
        elif ok and time.monotonic() - since >= quiet:
            return owned
        time.sleep(0.2)
    raise AssertionError(f"the group did not settle: {seen}")


def wait_read(members: list[Member], expected: dict[TP, int], timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = read_offsets(members)
        if all(set(range(n)) <= got.get(tp, set()) for tp, n in expected.items()):
            return
        time.sleep(0.3)
    missing = {tp: n - len(read_offsets(members).get(tp, set())) for tp, n in expected.items()}
    raise AssertionError(f"records not read within {timeout} s: {missing}")


def read_offsets(members: list[Member]) -> dict[TP, set[int]]:
    out: dict[TP, set[int]] = defaultdict(set)
    for m in members:
        for e in m.events():
            if e["event"] == "records":
                for t, p, o in e["records"]:
                    out[(t, p)].add(o)
    return out


def intervals(members: list[Member], end: float) -> dict[TP, list[tuple[float, float, str]]]:
    """Per partition, every (from, to, member) a member owned it, from the listener's calls."""
    out: dict[TP, list[tuple[float, float, str]]] = defaultdict(list)
    for m in members:
        start: dict[TP, float] = {}
        events = m.events()
        # a member stops reading before it closes its consumer, and closing may call the
        # revocation listener after it left the group: what it owns ends when it stopped
        stopped = next((e["t"] for e in events if e["event"] == "stopped"), None)
        for e in events:
            tps = [(t, p) for t, p in e.get("partitions", [])]
            if e["event"] == "assigned":
                for tp in tps:
                    start.setdefault(tp, e["t"])
            elif e["event"] in ("revoked", "lost"):
                ended = e["t"] if stopped is None else min(e["t"], stopped)
                for tp in tps:
                    if tp in start:
                        out[tp].append((start.pop(tp), ended, m.name))
        last = m.killed_at or stopped or end
        for tp, t0 in start.items():
            out[tp].append((t0, last, m.name))
    return out


def check_ownership_never_overlaps(members: list[Member]) -> int:
    """No partition owned by two members at once; returns how many ownership spans there were."""
    spans = intervals(members, time.time())
    for tp, iv in spans.items():
        iv.sort()
        for (_a0, a1, am), (b0, _b1, bm) in itertools.pairwise(iv):
            assert b0 >= a1, f"{tp} owned by {am} until {a1:.3f} and by {bm} from {b0:.3f}"
    return sum(len(v) for v in spans.values())


def check_records(members: list[Member], produced: dict[TP, int]) -> int:
    """Every produced record read; a record read twice only in two ownership epochs. Returns duplicates."""
    reads: dict[tuple[str, int, int], list[tuple[str, int]]] = defaultdict(list)
    for m in members:
        epoch: dict[TP, int] = defaultdict(int)
        for e in m.events():
            if e["event"] == "assigned":
                for t, p in e["partitions"]:
                    epoch[(t, p)] += 1
            elif e["event"] == "records":
                for t, p, o in e["records"]:
                    reads[(t, p, o)].append((m.name, epoch[(t, p)]))
    lost = [(tp, o) for tp, n in produced.items() for o in range(n) if (tp[0], tp[1], o) not in reads]
    assert not lost, f"{len(lost)} record(s) never read, e.g. {lost[:5]}"
    for record, by in reads.items():
        assert len(by) == len(set(by)), f"record {record} read twice in one ownership epoch: {by}"
    return sum(len(by) - 1 for by in reads.values())


def plan_frame(owned: dict[str, set[TP]], lags: dict[TP, int]) -> pd.DataFrame:
    return pd.DataFrame(
        [(c, t, p, lags[(t, p)]) for c, tps in owned.items() for t, p in tps], columns=["consumer", "topic", "partition", "lag"]
    )


def test_lag_sticky_group_balances_a_skewed_backlog_moves_little_and_outlives_a_killed_member(
    kafka: LocalKafka, tmp_path: Path
) -> None:
    topic, group = "grp-orders", "grp-lag-sticky"
    create_topic(kafka.bootstrap_servers, topic, len(SKEWED))
    produce(kafka.bootstrap_servers, topic, dict(enumerate(SKEWED)))
    backlog = {(topic, p): n for p, n in enumerate(SKEWED)}
    every = set(backlog)
    go = tmp_path / "go"
    static = ["--strategy", "lag-sticky", "--start-when-exists", str(go)]
    members: list[Member] = []
    try:
        # 1. three static members, holding their partitions (no commits: the lags stay the backlog)
        members += [Member(tmp_path, kafka, group, topic, n, "--instance-id", n, *static) for n in "abc"]
        three = wait_stable(members, every)
        led = last_led(members)
        assert led is not None and led["lagged"], led
        q = quality(plan_frame(three, backlog), {n: [topic] for n in three})
        assert q.optimality <= 1.05 and q.count_spread <= 1, (q, three)

        # 2. a fourth joins: 12 partitions over 4 means it takes 3, and only 3 move
        members.append(Member(tmp_path, kafka, group, topic, "d", "--instance-id", "d", *static))
        four = wait_stable(members, every)
        moved = sum(len(three[n] - four[n]) for n in three)
        assert len(four["d"]) == 3 and moved == 3, (three, four)
        assert quality(plan_frame(four, backlog), {n: [topic] for n in four}).count_spread <= 1

        # 3. everyone reads and commits the backlog
        go.touch()
        wait_read(members, backlog)

        # 4. b dies without leaving; its partitions wait out the session timeout, then move
        victim = next(m for m in members if m.name == "b")
        orphaned = four["b"]
        victim.kill()
        more = {(topic, p): 40 for p in range(len(SKEWED))}
        produce(kafka.bootstrap_servers, topic, dict.fromkeys(range(len(SKEWED)), 40), start=dict(enumerate(SKEWED)))
        after = wait_stable(members, every, timeout=SESSION_MS / 1000 + 40)
        assert set(after) == {"a", "c", "d"}
        # the survivors report what they own, so whoever leads now keeps it where it is
        assert all(four[n] <= after[n] for n in after), (four, after)
        assert set().union(*(after[n] - four[n] for n in after)) == orphaned
        taken = [
            e["t"]
            for m in alive(members)
            for e in m.events()
            if e["event"] == "assigned" and e["t"] > victim.killed_at and orphaned & {(t, p) for t, p in e["partitions"]}
        ]
        assert victim.killed_at is not None
        delay = min(taken) - victim.killed_at
        assert 0.6 * SESSION_MS / 1000 <= delay <= SESSION_MS / 1000 + 20, delay
        wait_read(members, {tp: backlog[tp] + more[tp] for tp in every})
    finally:
        for m in members:
            m.stop()
    check_ownership_never_overlaps(members)
    check_records(members, {tp: backlog[tp] + 40 for tp in every})


def test_cooperative_members_never_own_a_partition_at_the_same_time(kafka: LocalKafka, tmp_path: Path) -> None:
    topic, group = "grp-coop", "grp-cooperative"
    sizes = [600, 500, 400, 300, 200, 100, 50, 50, 20, 20, 10, 10]
    create_topic(kafka.bootstrap_servers, topic, len(sizes))
    produce(kafka.bootstrap_servers, topic, dict(enumerate(sizes)))
    every = {(topic, p) for p in range(len(sizes))}
    args = ["--strategy", "lag-sticky", "--cooperative"]
    members: list[Member] = []
    try:
        members += [Member(tmp_path, kafka, group, topic, n, *args) for n in ("a", "b")]
        wait_stable(members, every)
        members.append(Member(tmp_path, kafka, group, topic, "c", *args))
        wait_stable(members, every)
        members[0].stop()  # a dynamic member leaves the group cleanly
        produce(kafka.bootstrap_servers, topic, dict.fromkeys(range(len(sizes)), 30), start=dict(enumerate(sizes)))
        wait_stable(members, every)
        wait_read(members, {(topic, p): n + 30 for p, n in enumerate(sizes)})
    finally:
        for m in members:
            m.stop()
    led = [e for m in members for e in m.events() if e["event"] == "led"]
    assert any(e["deferred"] > 0 for e in led), "no rebalance ever needed a second round"
    revoked = [e for m in members for e in m.events() if e["event"] == "revoked" and e["partitions"]]
    assert revoked, "no partition was ever revoked"
    assert check_ownership_never_overlaps(members) > len(every)
    check_records(members, {(topic, p): n + 30 for p, n in enumerate(sizes)})


def moved(before: dict[str, set[TP]], after: dict[str, set[TP]]) -> int:
    """Partitions whose owner differs between two stable states."""
    owner = {tp: n for n, tps in before.items() for tp in tps}
    return sum(owner.get(tp) != n for n, tps in after.items() for tp in tps)


def test_cooperative_moves_what_eager_moves_on_a_join_a_killed_leader_and_a_leave(kafka: LocalKafka, tmp_path: Path) -> None:
    """An eager and a cooperative lag-sticky group side by side, on the same two topics with
    the same skewed backlog; their members hold their partitions paused and commit nothing, so
    both groups plan from the same lags all along. Members join one at a time (a group's plan
    depends on the order its members first joined), then a fourth joins, the leader is
    killed and another member leaves. After each change the cooperative group must own what
    the eager one owns, having moved no more partitions, never two owners at once."""
    sizes = {"grp-twin-a": [1912, 1375, 619, 277, 223, 68], "grp-twin-b": [1728, 690, 310, 261, 210, 68]}
    for topic, backlog in sizes.items():
        create_topic(kafka.bootstrap_servers, topic, len(backlog))
        produce(kafka.bootstrap_servers, topic, dict(enumerate(backlog)))
    every = {(t, p) for t, backlog in sizes.items() for p in range(len(backlog))}
    paused = ["--strategy", "lag-sticky", "--start-when-exists", str(tmp_path / "never")]
    groups: dict[str, list[Member]] = {"eager": [], "cooperative": []}

    def start(name: str) -> None:
        for protocol, members in groups.items():
            home = tmp_path / protocol
            home.mkdir(exist_ok=True)
            extra = ["--cooperative"] if protocol == "cooperative" else []
            members.append(Member(home, kafka, f"grp-twin-{protocol}", ",".join(sizes), name, *paused, *extra))

    def settled() -> dict[str, dict[str, set[TP]]]:
        with ThreadPoolExecutor(len(groups)) as pool:
            waits = {p: pool.submit(wait_stable, members, every, timeout=SESSION_MS / 1000 + 40) for p, members in groups.items()}
            return {protocol: wait.result() for protocol, wait in waits.items()}

    def member(protocol: str, name: str) -> Member:
        return next(m for m in groups[protocol] if m.name == name)

    states = []
    try:
        for name in "abc":
            start(name)
            states.append(settled())
        start("d")
        states.append(settled())
        leaders = {protocol: (last_led(members) or {}).get("member") for protocol, members in groups.items()}
        assert leaders["eager"] == leaders["cooperative"] == "a", leaders
        for protocol in groups:
            member(protocol, "a").kill()
        states.append(settled())
        for protocol in groups:
            member(protocol, "b").stop()  # a dynamic member leaves the group cleanly
        states.append(settled())
    finally:
        for members in groups.values():
            for m in members:
                m.stop()
    for step, (before, after) in enumerate(itertools.pairwise(states)):
        moves = {protocol: moved(before[protocol], after[protocol]) for protocol in groups}
        assert after["cooperative"] == after["eager"], (step, before, after)
        assert moves["cooperative"] <= moves["eager"], (step, moves)
    assert [set(s["cooperative"]) for s in states[-3:]] == [set("abcd"), set("bcd"), set("cd")]
    check_ownership_never_overlaps(groups["cooperative"])


class HeldRevocation(ConsumerRebalanceListener):
    """A rebalance listener that, once armed, keeps its member inside the next revocation
    until released: the member cannot rejoin, so the group's next round waits for it. It
    cannot heartbeat meanwhile either, so it lets go by itself well inside the session."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.holding = threading.Event()
        self.released = threading.Event()
        self.held_until_released = False

    def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked and self.armed.is_set():
            self.armed.clear()
            self.holding.set()
            self.held_until_released = self.released.wait(0.75 * SESSION_MS / 1000)

    def on_partitions_assigned(self, assigned: Any) -> None:
        pass


class InProcessGroup:
    """Consumers of one group in threads of this process, each polling until closed."""

    def __init__(self, kafka: LocalKafka, group: str, topic: str, assignor: type) -> None:
        from kafka import KafkaAdminClient

        self.kafka, self.group, self.topic, self.assignor = kafka, group, topic, assignor
        self.stop = threading.Event()
        self.owned: dict[str, set[TP]] = {}
        self.listeners: dict[str, HeldRevocation] = {}
        self.assignors: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []
        self.admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)

    def start(self, name: str) -> None:
        self.listeners[name] = listener = HeldRevocation()
        self.assignors[name] = assignor = self.assignor()
        self.owned[name] = set()

        def consume() -> None:
            from kafka import KafkaConsumer

            from spark_lag_assign.group import subscribe

            # client id = name: a dynamic member's id starts with it, so members sort by name
            consumer = KafkaConsumer(
                bootstrap_servers=self.kafka.bootstrap_servers,
                group_id=self.group,
                client_id=name,
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=500,
                max_poll_interval_ms=15000,
                enable_auto_commit=False,
                partition_assignment_strategy=[assignor],
            )
            try:
                subscribe(consumer, [self.topic], listener)
                while not self.stop.is_set():
                    consumer.poll(timeout_ms=200)
                    self.owned[name] = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            finally:
                consumer.close()

        thread = threading.Thread(target=consume, name=f"{self.group}-{name}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def state(self) -> str:
        return str(self.admin.describe_groups([self.group]).get(self.group, {}).get("group_state"))

    def settled(self, every: set[TP], timeout: float = 30.0) -> dict[str, set[TP]]:
        """The members' partitions once they cover ``every`` once, the leader's plan for this
        many members left nothing in flight, and nothing changed for a second and a half."""
        deadline = time.monotonic() + timeout
        seen: Any = None
        since = time.monotonic()
        while time.monotonic() < deadline:
            owned = {n: set(tps) for n, tps in self.owned.items()}
            led = [a.last for a in self.assignors.values() if a.last is not None and a.last.members == len(owned)]
            ok = (
                sum(map(len, owned.values())) == len(every)
                and set().union(*owned.values()) == every
                and bool(led)
                and all(r.deferred == 0 for r in led)
            )
            state = (ok, {n: sorted(v) for n, v in owned.items()})
            if state != seen:
                seen, since = state, time.monotonic()
            elif ok and time.monotonic() - since >= 1.5:
                return owned
            time.sleep(0.1)
        raise AssertionError(f"group {self.group} did not settle: {seen}")

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=20)
        self.admin.close()


def test_a_member_joining_while_moves_are_in_flight_ends_where_the_eager_protocol_ends(kafka: LocalKafka) -> None:
    """KIP-54 sticky, so that only counts matter. a owns t-0..t-2; c joins and a gives up t-2
    for it, but a is held inside that revocation while d joins, so the group's next round has
    a, c and d. The eager protocol (c's join completed, then d's) ends with t-2 at c and t-1
    at d; the cooperative one must end there too."""
    from spark_lag_assign.group import CooperativeStickyAssignor, StickyAssignor

    topic = "grp-in-flight"
    create_topic(kafka.bootstrap_servers, topic, 3)
    every = {(topic, p) for p in range(3)}
    eager = InProcessGroup(kafka, "grp-in-flight-eager", topic, StickyAssignor)
    cooperative = InProcessGroup(kafka, "grp-in-flight-cooperative", topic, CooperativeStickyAssignor)
    try:
        for group in (eager, cooperative):
            group.start("a")
            assert group.settled(every) == {"a": every}
        for name in ("c", "d"):
            eager.start(name)
            eager.settled(every)
        cooperative.listeners["a"].armed.set()
        cooperative.start("c")
        assert cooperative.listeners["a"].holding.wait(20), "a was never asked to give a partition up"
        cooperative.start("d")
        # d's join has reached the coordinator once the group prepares a rebalance; a, held,
        # has not rejoined, so the round that completes c's move will have d in it
        deadline = time.monotonic() + 0.6 * SESSION_MS / 1000
        while cooperative.state() != "PreparingRebalance" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cooperative.state() == "PreparingRebalance"
        cooperative.listeners["a"].released.set()
        final = cooperative.settled(every)
        ended = eager.settled(every)
    finally:
        cooperative.close()
        eager.close()
    assert cooperative.listeners["a"].held_until_released  # the schedule was the one described
    assert ended == {"a": {(topic, 0)}, "c": {(topic, 2)}, "d": {(topic, 1)}}
    assert final == ended


def test_the_leader_never_waits_for_a_lag_read(kafka: LocalKafka) -> None:
    """The lag read hangs for longer than the session timeout; the group still forms at
    once, by count, and every assign() returns in milliseconds."""
    from spark_lag_assign.group import GroupLagMonitor, LagStickyAssignor

    topic = "grp-hang"
    create_topic(kafka.bootstrap_servers, topic, 6)
    release = threading.Event()
    entered = threading.Event()

    def hanging_reader(topics: object) -> pd.DataFrame:
        entered.set()
        release.wait(3 * SESSION_MS / 1000)
        raise TimeoutError("released")

    monitor = GroupLagMonitor(None, topic, topics=[topic], reader=hanging_reader)
    try:
        assert entered.wait(5)
        assignors = [LagStickyAssignor(monitor) for _ in range(2)]
        formed, assigned = form_group(kafka, topic, assignors, timeout=SESSION_MS / 1000 + 6)
        assert formed is not None and formed < SESSION_MS / 1000, (formed, assigned)
        assert sorted(len(a) for a in assigned) == [3, 3]
        assert not release.is_set() and monitor.snapshot() is None  # the read hung all along
        led = [a.last for a in assignors if a.last is not None]
        assert led and all(r.seconds < 0.5 and not r.lagged for r in led), led
    finally:
        release.set()
        monitor.close()


def form_group(kafka: LocalKafka, topic: str, assignors: list[Any], *, timeout: float) -> tuple[float | None, list[set[TP]]]:
    """Consumers in threads, one per assignor, joined with ``subscribe``; how long until the
    broker calls the group Stable with every member holding a share (None: never)."""
    from kafka import KafkaAdminClient, KafkaConsumer

    from spark_lag_assign.group import subscribe

    stop = threading.Event()
    assigned: list[set[TP]] = [set() for _ in assignors]

    def consume(i: int) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=topic,
            client_id=f"{topic}-{i}",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            max_poll_interval_ms=15000,
            partition_assignment_strategy=[assignors[i]],
        )
        subscribe(consumer, [topic])
        try:
            while not stop.is_set():
                consumer.poll(timeout_ms=200)
                assigned[i] = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(len(assignors))]
    started = time.monotonic()
    formed = None
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        for t in threads:
            t.start()
        while formed is None and time.monotonic() - started < timeout:
            state = admin.describe_groups([topic]).get(topic, {})
            if state.get("group_state") == "Stable" and len(state.get("members", [])) == len(assignors) and all(assigned):
                formed = time.monotonic() - started
            time.sleep(0.2)
    finally:
        admin.close()
        stop.set()
        for t in threads:
            t.join(timeout=20)
    return formed, assigned


@pytest.mark.parametrize("run", range(2))
def test_a_slow_assign_does_not_strand_the_leader(kafka: LocalKafka, run: int) -> None:
    """kafka-python 3.0.12 loses a leader whose rejoin completes between two polls (see
    ``spark_lag_assign.group.consumer``); an assign() of 150 ms made that happen in most runs.
    With ``subscribe`` loading metadata first the group forms every time."""
    from spark_lag_assign.group import LagStickyAssignor

    class Slow(LagStickyAssignor):
        def assign(self, cluster: Any, members: Any) -> Any:
            time.sleep(0.15)  # a big group's plan, or a slow machine
            return super().assign(cluster, members)

    topic = f"grp-slow-{run}"
    create_topic(kafka.bootstrap_servers, topic, 6)
    formed, assigned = form_group(kafka, topic, [Slow() for _ in range(3)], timeout=SESSION_MS / 1000 + 6)
    assert formed is not None and formed < SESSION_MS / 1000, (formed, assigned)
    assert sorted(len(a) for a in assigned) == [2, 2, 2]


def test_the_monitor_reads_real_lags_with_commits_and_resets(kafka: LocalKafka) -> None:
    from spark_lag_assign.group import GroupLagMonitor
    from spark_lag_assign.testing.localkafka import commit

    topic, group = "grp-monitor", "grp-monitor"
    create_topic(kafka.bootstrap_servers, topic, 3)
    produce(kafka.bootstrap_servers, topic, {0: 50, 1: 30, 2: 10})
    commit(kafka.bootstrap_servers, group, {(topic, 0): 20, (topic, 1): 30})
    for reset, lag2 in (("earliest", 10), ("latest", 0)):
        with GroupLagMonitor(kafka.bootstrap_servers, group, topics=[topic, "no-such-topic"], reset=reset) as monitor:
            assert monitor.wait_ready(15)
            snap = monitor.snapshot()
            assert snap is not None
            assert snap.lags.values.tolist() == [[topic, 0, 30], [topic, 1, 0], [topic, 2, lag2]]
