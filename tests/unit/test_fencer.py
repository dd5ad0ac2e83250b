"""The fencer's decisions (``consume.fencer.FencerCore``) and what a pipeline takes for a
commit that no pipeline of the plan made (``consume.options.foreign_commits``)."""

from __future__ import annotations

import threading

import pytest

from spark_lag_assign.consume.fencer import FenceCommits, Fencer, FencerCore, Look, NoteFence, fence_done
from spark_lag_assign.consume.options import foreign_commits
from spark_lag_assign.consume.protocol import Handover, Stop
from spark_lag_assign.store import StoreNotAuthorizedError, open_store
from spark_lag_assign.store.base import FENCER, ClaimRecord

P = ("t", 0)


def claim(consumer: str, seq: int, state: str = "reading", fences: dict | None = None, incarnation: str | None = None) -> ClaimRecord:
    return ClaimRecord(consumer, incarnation or f"{consumer}1", seq, 1, frozenset({P}), 10.0, state, fences or {})


def test_the_fencer_fences_only_once_it_saw_the_lease_run_out_itself() -> None:
    fencer = FencerCore()
    held = claim("A", 7)
    asked = claim("B", 3, "waiting", {"A": ("A1", 7)})
    fencer.saw_claims({"A": held, "B": asked}, read_at=100.0)  # the fencer first sees A's version 7 now
    assert isinstance(fencer.next(100.0), Look)  # B judged A gone; the fencer has not seen a lease pass
    fencer.saw_claims({"A": held, "B": asked}, read_at=109.9)
    assert isinstance(fencer.next(109.9), Look)
    fencer.saw_claims({"A": held, "B": asked}, read_at=110.0)  # a read a whole lease later: A wrote nothing
    note = fencer.next(110.0)
    assert note == NoteFence((("A", ("A1", 7)),), "fencing A")  # the note first ...
    fencer.wrote(ClaimRecord(FENCER, "F1", 1, 0, frozenset(), 3600.0, note.state, dict(note.fences)))
    assert not fence_done(fencer.written, "A", ("A1", 7))
    assert fencer.next(110.1) == FenceCommits("A", ("A1", 7))  # ... then the fence
    fencer.fenced("A", ("A1", 7))
    done = fencer.next(110.2)
    assert done == NoteFence((("A", ("A1", 7)),), "fenced")  # ... then the answer B waits for
    fencer.wrote(ClaimRecord(FENCER, "F1", 2, 0, frozenset(), 3600.0, done.state, dict(done.fences)))
    assert fence_done(fencer.written, "A", ("A1", 7))
    assert isinstance(fencer.next(110.3), Look)


def test_a_request_about_a_holder_that_keeps_renewing_fences_nobody() -> None:
    """A pipeline that writes a request on purpose (or on a clock that runs fast) cannot make
    the fencer fence a holder whose lease runs: each renewal is a new version, seen anew."""
    fencer = FencerCore()
    for t in range(0, 60, 3):
        held = claim("A", 1 + t)
        forged = claim("B", 1, "waiting", {"A": ("A1", 1 + t)})
        fencer.saw_claims({"A": held, "B": forged}, read_at=float(t))
        assert isinstance(fencer.next(float(t)), Look)
    stale = claim("B", 2, "waiting", {"A": ("A1", 1)})  # a request about a version A no longer has
    fencer.saw_claims({"A": claim("A", 99), "B": stale}, read_at=1000.0)
    assert isinstance(fencer.next(1000.0), Look)


def test_a_pipeline_with_a_fencer_heeds_only_the_fencers_notes() -> None:
    """A note in another pipeline's claim is a request; only the fencer's stops a pipeline,
    so no pipeline can make another stop by writing one."""
    a = Handover("A", "A1", lease=10, margin=1, fence_authority=FENCER)
    a.saw_plan(1, frozenset({P}))
    mine = claim("A", 1)
    a.wrote(mine, sent_at=0.0)
    a.commits_opened(("A1", 1), 0.0)
    a.saw_claims({"A": mine}, read_at=0.0)
    a.started(1, frozenset({P}))
    a.saw_claims({"A": mine, "B": claim("B", 4, "waiting", {"A": ("A1", 1)})}, read_at=1.0)
    assert a.fenced_by() is None and not isinstance(a.next(1.0), Stop)
    record = ClaimRecord(FENCER, "F1", 3, 0, frozenset(), 3600.0, "fencing A", {"A": ("A1", 1)})
    a.saw_claims({"A": mine, FENCER: record}, read_at=2.0)
    assert a.fenced_by() == FENCER and isinstance(a.next(2.0), Stop)


def test_the_fencers_answer_is_read_per_fence() -> None:
    record = ClaimRecord(FENCER, "F1", 5, 0, frozenset(), 3600.0, "fencing C", {"A": ("A1", 7), "C": ("C2", 1)})
    assert fence_done(record, "A", ("A1", 7))  # done before C's began
    assert not fence_done(record, "C", ("C2", 1))  # in progress
    assert not fence_done(record, "A", ("A1", 8)) and not fence_done(None, "A", ("A1", 7))


def test_a_fence_note_whose_write_failed_is_written_again_before_any_fence() -> None:
    """The note goes before the fence, also when its write failed (the driver reports no
    ``wrote``): with no record yet, and with an older record that notes another fence."""
    fencer = FencerCore()
    held, asked = claim("A", 7), claim("B", 3, "waiting", {"A": ("A1", 7)})
    fencer.saw_claims({"A": held, "B": asked}, read_at=100.0)
    fencer.saw_claims({"A": held, "B": asked}, read_at=110.0)
    assert fencer.next(110.0) == NoteFence((("A", ("A1", 7)),), "fencing A")
    assert fencer.next(110.1) == NoteFence((("A", ("A1", 7)),), "fencing A")  # the write failed: again
    fencer.wrote(ClaimRecord(FENCER, "F1", 1, 0, frozenset(), 3600.0, "fencing A", {"A": ("A1", 7)}))
    assert fencer.next(110.2) == FenceCommits("A", ("A1", 7))
    fencer.fenced("A", ("A1", 7))
    fencer.wrote(ClaimRecord(FENCER, "F1", 2, 0, frozenset(), 3600.0, "fenced", {"A": ("A1", 7)}))
    c_held, d_asks = claim("C", 2), claim("D", 5, "waiting", {"C": ("C1", 2)})
    view = {"A": held, "B": asked, "C": c_held, "D": d_asks}
    fencer.saw_claims(view, read_at=120.0)
    fencer.saw_claims(view, read_at=130.0)
    both = (("A", ("A1", 7)), ("C", ("C1", 2)))
    assert fencer.next(130.0) == NoteFence(both, "fencing C")
    assert fencer.next(130.1) == NoteFence(both, "fencing C")  # the record still says "fenced": no fence yet


def test_the_fencer_looks_again_a_poll_later() -> None:
    fencer = FencerCore(poll=2.5)
    fencer.saw_claims({"A": claim("A", 7)}, read_at=40.0)
    assert fencer.next(41.0) == Look(43.5)


def test_neither_an_unreadable_claim_nor_the_fencers_own_notes_are_requests() -> None:
    """Only a pipeline's claim asks for a fence; the fencer's record (a restarted fencer sees
    its predecessor's) notes fences made, and an unreadable claim asks for nothing."""
    fencer = FencerCore()  # a restarted fencer: it remembers no fence it made
    own = ClaimRecord(FENCER, "F1", 4, 0, frozenset(), 3600.0, "fenced", {"A": ("A1", 7)})
    view = {"A": claim("A", 7), FENCER: own, "B": "claims/B/000003.json: not JSON"}
    fencer.saw_claims(view, read_at=100.0)
    fencer.saw_claims(view, read_at=110.0)
    assert fencer.requests() == []
    assert isinstance(fencer.next(110.0), Look)
    # neither hides a real request that comes after it in the view
    view = {FENCER: own, "B": "claims/B/000003.json: not JSON", "A": claim("A", 8), "C": claim("C", 2, "waiting", {"A": ("A1", 8)})}
    fencer.saw_claims(view, read_at=120.0)
    assert fencer.requests() == [("A", ("A1", 8))]


def owners(generation: int) -> dict[tuple[str, int], str] | None:
    return {1: {P: "A", ("t", 1): "B"}, 2: {P: "B", ("t", 1): "B"}}.get(generation)


def test_a_commit_naming_a_consumer_that_did_not_own_the_partition_is_foreign() -> None:
    metadata = {
        P: "spark-lag-assign consumer=A generation=1",  # A owned t-0 in 1: its own commit
        ("t", 1): "spark-lag-assign consumer=A generation=1",  # B owned t-1 in 1: A forged it
        ("t", 2): "spark-lag-assign consumer=B generation=2",  # nobody owned t-2 in 2
        ("t", 3): "spark-lag-assign consumer=B generation=9",  # a generation no plan has
        ("t", 4): "spark-lag-assign consumer=A generation=0",  # not kept: not judged
        ("t", 5): "",  # not ours (the group's first commit, another tool): not judged
    }
    found = foreign_commits(metadata, owners, newest=2)
    assert found == {
        ("t", 1): "names A under generation 1, where B owned it",
        ("t", 2): "names B under generation 2, where nobody owned it",
        ("t", 3): "names B under generation 9, newer than any plan (2)",
    }


def test_a_commit_under_a_generation_no_longer_kept_is_foreign_only_if_no_kept_plan_has_its_consumer() -> None:
    """Generations 1 and 2 are gone. An outsider's commit under them is foreign; a pipeline's
    is not, even where the partition moved away longer ago than the store remembers (its
    successor was down while the planner published on: distrusting it would start from the
    reset rule and could skip records). What cannot be read judges nothing."""
    kept_owners = {3: {P: "B", ("t", 1): "B"}, 4: {P: "B", ("t", 1): "B"}}
    kept = {3: frozenset({"A", "B"}), 4: frozenset({"B"})}
    metadata = {
        P: "spark-lag-assign consumer=A generation=1",  # A's, before t-0 moved to B: trusted
        ("t", 1): "spark-lag-assign consumer=M generation=2",  # M is in no plan kept
        ("t", 2): "spark-lag-assign consumer=B generation=0",  # B is
    }
    found = foreign_commits(metadata, kept_owners.get, newest=4, kept=lambda: kept)
    assert found == {("t", 1): "names M under generation 2 (no longer kept), and no plan the store keeps has M"}
    assert foreign_commits(metadata, kept_owners.get, newest=4, kept=lambda: None) == {}
    # generation 2 is listed as kept but cannot be read now: not judged
    assert foreign_commits(metadata, kept_owners.get, newest=4, kept=lambda: {2: frozenset(), **kept}) == {}


def test_a_refused_claims_read_ends_the_fencer_with_the_line_naming_the_acl(tmp_path) -> None:
    """Retrying grants no ACL: the fencer stops at once instead of warning every second while
    the pipelines wait out their handover timeout."""
    line = "not authorized: grant READ on Topic:orders.claims. (prefixed) to this principal"
    with open_store(str(tmp_path / "store")) as store:

        def refused() -> dict:
            raise StoreNotAuthorizedError(line)

        store.claims = refused  # type: ignore[method-assign]  # the refusal a broker would give
        fencer = Fencer(store, lambda consumer, version: None, poll=0.05)
        ended: list[BaseException] = []

        def run() -> None:
            try:
                fencer.run()
            except BaseException as exc:  # what ended it is the observation
                ended.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(10.0)
        fencer.stop()
        assert not thread.is_alive() and len(ended) == 1
        with pytest.raises(StoreNotAuthorizedError, match=r"grant READ on Topic:orders\.claims\. \(prefixed\)"):
            raise ended[0]


def test_the_fencer_counts_a_lease_from_when_a_slow_read_returned() -> None:
    """A's renewal landed while the fencer's read ran (began 2.0, returned 3.5): the fencer
    fences only a lease after the return, never a holder whose renewal its read raced."""
    fencer = FencerCore()
    held = claim("A", 5)
    asked = claim("B", 3, "waiting", {"A": ("A1", 5)})
    fencer.saw_claims({"A": held, "B": asked}, read_at=2.0, returned_at=3.5)
    fencer.saw_claims({"A": held, "B": asked}, read_at=12.05)
    assert isinstance(fencer.next(12.1), Look)
    fencer.saw_claims({"A": held, "B": asked}, read_at=13.5)
    assert fencer.next(13.5) == NoteFence((("A", ("A1", 5)),), "fencing A")


def test_a_restarted_fencer_carries_its_predecessors_notes_on_and_finishes_a_fence_under_way() -> None:
    """Fencer F1 noted a fence of C earlier and was fencing A when it stopped. F2 keeps both
    notes (dropped, C or A could reopen a producer unseen) and fences A again before it says
    "fenced": the note alone proves nothing about the fence."""
    previous = ClaimRecord(FENCER, "F1", 4, 0, frozenset(), 3600.0, "fencing A", {"A": ("A1", 7), "C": ("C1", 2)})
    fencer = FencerCore()
    fencer.took_over(previous)
    view = {"A": claim("A", 7), "C": claim("C", 2), FENCER: previous}
    fencer.saw_claims(view, read_at=0.0)
    note = fencer.next(0.0)
    assert note == NoteFence((("A", ("A1", 7)), ("C", ("C1", 2))), "fencing A")
    fencer.wrote(ClaimRecord(FENCER, "F2", 1, 0, frozenset(), 3600.0, note.state, dict(note.fences)))
    assert fencer.next(0.1) == FenceCommits("A", ("A1", 7))
    fencer.fenced("A", ("A1", 7))
    assert fencer.next(0.2) == NoteFence((("A", ("A1", 7)), ("C", ("C1", 2))), "fenced")
    settled = FencerCore()
    settled.took_over(ClaimRecord(FENCER, "F1", 5, 0, frozenset(), 3600.0, "fenced", {"C": ("C1", 2)}))
    settled.saw_claims({"C": claim("C", 2)}, read_at=0.0)
    assert isinstance(settled.next(0.0), Look)  # nothing under way: nothing fenced again
    settled.saw_claims({"A": claim("A", 1), "B": claim("B", 1, "waiting", {"A": ("A1", 1)}), "C": claim("C", 2)}, read_at=0.0)
    settled.saw_claims({"A": claim("A", 1), "B": claim("B", 1, "waiting", {"A": ("A1", 1)}), "C": claim("C", 2)}, read_at=10.0)
    assert settled.next(10.0) == NoteFence((("A", ("A1", 1)), ("C", ("C1", 2))), "fencing A")


def test_the_fencer_drops_a_note_once_the_holder_stopped_reading_and_reads_no_fence_into_a_copied_record() -> None:
    """A note stays while the fenced stint may still read (``still_fenced``), then goes; and a
    directory store's take-over copy of the fencer's record (state "taken over") is no fence
    under way, whatever its notes name."""
    fencer = FencerCore()
    fencer.took_over(ClaimRecord(FENCER, "F1", 3, 0, frozenset(), 3600.0, "fenced", {"A": ("A1", 7)}))
    released = claim("A", 8, "released")
    view = {"A": released, "C": claim("C", 1), "B": claim("B", 2, "waiting", {"C": ("C1", 1)})}
    fencer.saw_claims(view, read_at=0.0)
    fencer.saw_claims(view, read_at=10.0)
    assert fencer.next(10.0) == NoteFence((("C", ("C1", 1)),), "fencing C")  # A's note is gone
    copied = FencerCore()
    copied.took_over(ClaimRecord(FENCER, "F2", 1, 0, frozenset(), 3600.0, "taken over", {"er": ("er1", 2)}))
    copied.saw_claims({"er": claim("er", 2)}, read_at=0.0)
    assert isinstance(copied.next(0.0), Look)
