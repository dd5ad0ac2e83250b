"""The consuming side: pipelines that read as the plan says, commit their progress to the
group, and hand partitions over when a new plan generation moves them.

Spark's Kafka source keeps its position in the query's checkpoint and commits nothing to
Kafka, and a query restarted with a different ``assign`` fails on the partitions it lost.
This package closes the loop plan -> pipelines -> lag -> plan, across hosts: a planner and
every pipeline are separate applications that share only the store (``kafka://`` or a
directory, ``spark_lag_assign.store``) and the Kafka cluster.

- ``read_assigned`` (``reading``): one consumer's part of a plan as Spark's Kafka source;
- ``PlanFollower`` (``follower``): keeps one consumer's query in step with the plan, with
  its collaborators: ``RunningQuery`` (``reading``: the query, its checkpoints, the lease
  guard), ``PipelineCommits`` (``commits``: its commit side, shared with Spark's listener
  thread), ``StartOffsets`` (``starting``: where a generation starts) and ``FollowerReport``
  (``report``: events and metrics);
- ``Handover`` (``protocol``): the protocol's decisions, a pure state machine;
- ``ProgressCommitter`` (``committer``) and ``FencedGroupCommit`` (``kafka_commit``): every
  completed micro-batch's end offsets committed to the group, fenced per consumer id;
- ``options``: the Kafka source's options and where a pipeline starts.

Handover protocol
-----------------
Every consumer id has one *claim* in the store, written only by its live incarnation (a
restarted driver takes the id over and fences the old one: ``ClaimFencedError`` tells a
zombie to stop). A claim names the generation its writer acts on, the partitions it may be
reading (``holds``) and its ``lease`` (seconds). Every pipeline commits offsets under a
Kafka transactional id of its consumer's own, which a successor can fence.

1. Read the newest plan; take the consumer id over in the store (this fences an earlier
   incarnation's claim writes) and keep what that incarnation claimed as held until its
   lease runs out.
2. Write a claim: the generation and every partition it wants (its part of the plan, plus
   whatever its predecessor still holds).
3. Read every claim to the end of the store, after that write.
4. Decide, partition by partition. A claim of a *newer* generation on a wanted partition
   means this pipeline is stale: read the plan again (step 1), never proceed. A claim of an
   older or equal generation from another consumer that names it means an earlier owner:
   wait until it releases it (a claim without it) or until a read that began a whole lease
   after this pipeline first saw that record still shows it unchanged. An unreadable claim
   holds everything. Waiting is bounded by ``handover_timeout`` (``HandoverTimeoutError``
   names who holds what).
5. Before taking over from an earlier owner whose lease ran out, write a claim that notes
   the fence (the owner and its claim version), then fence its commits (its transactional
   id is initialised by the new owner, aborting any open transaction).
6. Open a producer of our own commit id (a new epoch, fencing our earlier incarnations),
   read every claim again in a read that begins after the open, and start only if none
   notes a fence of this claim. Start from the group's committed offsets (never behind what
   a releasing owner's claim says it committed), with a checkpoint of this generation and
   incarnation.
7. While reading: renew the claim every ``lease / 3``; stop reading ``margin`` seconds
   before the lease lapses by this process's own monotonic clock if no renewal succeeded
   (a renewal sent after that moment revives nothing); commit each completed batch
   (metadata: consumer and generation). A refused commit, a fence note naming this stint,
   a lapsed lease: stop at once without committing and go back to step 2. A failure that
   closes the committer's producer holds every commit until step 6's open-then-read check
   has passed again; the committer never opens a producer by itself, because that open
   would take the epoch back from a successor that fenced it.
8. A newer generation that moves this consumer's partitions: stop between batches, commit
   the last completed batch, then write a claim without the partitions given up (the
   release), and go to step 2. A newer generation with the same partitions only renews.
9. ``stop()``, a query that ends by itself (``availableNow``) or a plan without this
   consumer: steps 8's stop and commit, then a claim of nothing. A final commit whose
   producer a failure closed waits, keeping the claim renewed, for step 6's check and is
   retried; one that keeps failing never releases: the lease runs out instead, and the
   successor fences it.

Invariants (checked after every step of ``tests/unit/test_handover_model.py``)
  I1 no two live pipelines (leases valid by their own clocks) read one partition at once;
  I2 a pipeline whose lease lapsed stops its query without committing at its first own
     step, so it completes at most one micro-batch past its lease;
  I3 the group's committed offset of a partition never goes backwards;
  I4 nothing is lost: every offset below a committed offset reached a sink;
  I5 once plans stop changing and every pipeline runs, every partition is read by its
     owner and the group's commits reach the end offsets;
  I6 once a query started reading a partition, no commit of an earlier query on it is
     accepted;
  D  a record is read twice only if an earlier query read it after its last accepted commit.
I1 and I2 rest on clocks that run within the margin of each other; I3-I6 and D hold
whatever the clocks do (the model checks both).

Delivery is at least once: a new owner starts where the old one committed; records are read
twice only around a handover (the batch a stop interrupted; after a lapse, the batch whose
commit the lapse caught and the one batch the paused pipeline completes when it resumes). A
sink that writes to Kafka can drop the second with ``PlanFollower.write_batch``, which puts
its records and the offsets in one transaction that a successor's fencing aborts.
"""

from __future__ import annotations

from spark_lag_assign.consume.events import FollowerEvent, RunSummary
from spark_lag_assign.consume.follower import PlanFollower
from spark_lag_assign.consume.reading import AssignedStream, StartQuery, read_assigned

__all__ = ["AssignedStream", "FollowerEvent", "PlanFollower", "RunSummary", "StartQuery", "read_assigned"]
