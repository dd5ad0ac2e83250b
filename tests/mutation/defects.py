"""Deliberate safety defects that mutmut's operators do not write: whole checks removed, a
condition replaced by another, a statement dropped. Each is one edit of the decision code;
``make test-mutation`` applies them one at a time and expects the protocol tests that
``make test`` runs to fail on every one. The first nine are the kinds the handover's proof
once missed; then the committer's producer and the fence notes; then eight holes a second
reader found after that (a lease counted from a read's start, by each caller and by the one
dating rule they share, notes a restart drops, a late view or a late write believed); the
last three the follower's own lease checks.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL = "spark_lag_assign/consume/protocol.py"
COMMITTER = "spark_lag_assign/consume/kafka_commit.py"
FENCER_MODULE = "spark_lag_assign/consume/fencer.py"
FOLLOWER = "spark_lag_assign/consume/follower.py"
READING = "spark_lag_assign/consume/reading.py"


@dataclass(frozen=True)
class Defect:
    name: str
    path: str
    old: str
    new: str


DEFECTS = (
    Defect(
        "a newer-generation claim is treated as a release",
        PROTOCOL,
        "            if record.generation > generation:\n                return ReadPlan(generation, renew_at)  # we are stale: never proceed\n",
        "            if record.generation > generation:\n                continue\n",
    ),
    Defect(
        "a reader ignores its lapsed lease",
        PROTOCOL,
        '        if now >= self.deadline():\n            return "the lease lapsed (no claim written for too long)"\n',
        "",
    ),
    Defect(
        "a takeover does not fence the old holder",
        PROTOCOL,
        "                if (holder, record.version) not in self.fenced:\n",
        "                if False:\n",
    ),
    Defect(
        "a start is decided on a claims view read before our own write",
        PROTOCOL,
        "        if not self.view_is_fresh:\n            return ReadClaims()\n",
        "",
    ),
    Defect(
        "a lease's expiry is judged by now, not by when the view was read",
        PROTOCOL,
        "            if self.view_read_at >= expires:",
        "            if now >= expires:",
    ),
    Defect(
        "owners of an older generation are ignored when starting",
        PROTOCOL,
        "            overlap = record.holds & target\n",
        "            overlap = record.holds & target if record.generation >= generation else frozenset()\n",
    ),
    Defect(
        "a restarted incarnation forgets its predecessor",
        PROTOCOL,
        "        if predecessor is not None and predecessor.incarnation != self.incarnation:\n",
        "        if False:\n",
    ),
    Defect(
        "the lease has no safety margin",
        PROTOCOL,
        "        return self.sent_at + self.written.lease - self.margin\n",
        "        return self.sent_at + self.written.lease\n",
    ),
    Defect(
        "a zombie incarnation keeps reading",
        PROTOCOL,
        '        if self.zombie:\n            return "a newer incarnation of this consumer took over"\n',
        "",
    ),
    Defect(
        "the committer opens a producer by itself after a failure (undoing a successor's fence)",
        COMMITTER,
        '            if verdict == "hold":\n',
        '            if verdict == "hold" and self.gate.state == "closed":\n'
        "                self.open()\n"
        "                self.gate.allow(new_query=False)\n"
        '                verdict = "send"\n'
        '            if verdict == "hold":\n',
    ),
    Defect(
        "a reopened producer is checked by a claims read that began before the open",
        PROTOCOL,
        "        if self.commits is not None and read_at >= self.commits_opened_at:\n",
        "        if self.commits is not None:\n",
    ),
    Defect(
        "a reopened producer's commits are allowed without a claims read after the open",
        PROTOCOL,
        "        if not self.commits_checked:\n            return ReadClaims()\n        return AllowCommits()\n",
        "        return AllowCommits()\n",
    ),
    Defect(
        "a successor fences before its claim notes the fence",
        PROTOCOL,
        "                    if self.written.fences.get(holder) != record.version:\n",
        "                    if False:\n",
    ),
    Defect(
        "a fence note is dropped as soon as the fenced holder writes again",
        PROTOCOL,
        '        and (record.version == version or record.state in ("reading", "stopping"))\n',
        "        and record.version == version\n",
    ),
    Defect(
        "with a fencer, a note in any pipeline's claim stops a pipeline",
        PROTOCOL,
        "            if self.fence_authority is not None and holder != self.fence_authority:\n                continue\n",
        "",
    ),
    Defect(
        "the fencer fences on a request without seeing the lease run out itself",
        FENCER_MODULE,
        "            if self.view_read_at >= self.first_seen[(holder, version)] + held.lease:\n",
        "            if True:\n",
    ),
    Defect(
        "the fencer fences before its record notes the fence",
        FENCER_MODULE,
        '            if self.written is not None and self.written.fences.get(holder) == version and self.written.state == f"fencing {holder}":\n',
        "            if True:\n",
    ),
    Defect(
        "a pipeline starts once the fencer's record names the fence, before the fencer did it",
        FENCER_MODULE,
        '        and record.state != f"fencing {holder}"\n',
        "",
    ),
    Defect(
        "a pipeline ignores fence notes on its own stint",
        PROTOCOL,
        "            if noted is not None and noted[0] == self.incarnation and noted[1] >= self.commits_since:\n",
        "            if False:\n",
    ),
    Defect(
        "a renewal sent after the lease lapsed revives it",
        PROTOCOL,
        "            self.lease_lapsed = True\n",
        "            pass\n",
    ),
    Defect(
        "a refused commit does not stop the reader",
        PROTOCOL,
        '        if self.commit_refused:\n            return "a commit was refused: another pipeline took over"\n',
        "",
    ),
    Defect(
        "a final commit that waits is retried after the lease lapsed",
        PROTOCOL,
        "        why = self._replaced(now)\n        if why is not None:  # whatever the stopped query read stays uncommitted",
        "        why = None\n        if why is not None:  # whatever the stopped query read stays uncommitted",
    ),
    Defect(
        "a claim's lease counts from when the read that showed it began, not when it returned",
        PROTOCOL,
        "        date_claims(self.first_seen, view, read_at, returned_at)\n",
        "        date_claims(self.first_seen, view, read_at, None)\n",
    ),
    Defect(
        "a renewal whose write returned after the lease lapsed extends it",
        PROTOCOL,
        "        returned = returned_by(sent_at, returned_at)\n",
        "        returned = sent_at\n",
    ),
    Defect(
        "the shared dating rule counts from when a store call began, not when it returned",
        PROTOCOL,
        "    return began if returned_at is None else max(began, returned_at)\n",
        "    return began\n",
    ),
    Defect(
        "a new incarnation drops its predecessor's fence notes",
        PROTOCOL,
        "                self.fence_intents.setdefault(holder, version)\n",
        "                pass\n",
    ),
    Defect(
        "a fence note on a holder the view does not show is dropped",
        PROTOCOL,
        "    if not isinstance(record, ClaimRecord):  # not shown (nothing read yet) or unreadable: it may still read\n        return True\n",
        "    if not isinstance(record, ClaimRecord):\n        return False\n",
    ),
    Defect(
        "an older claims view delivered late replaces a newer one",
        PROTOCOL,
        "        if read_at < self.view_read_at:\n            return\n",
        "",
    ),
    Defect(
        "the fencer counts a lease from when its read began",
        FENCER_MODULE,
        "        date_claims(self.first_seen, self.view, read_at, returned_at)\n",
        "        date_claims(self.first_seen, self.view, read_at, None)\n",
    ),
    Defect(
        "a restarted fencer drops its predecessor's notes and the fence it had under way",
        FENCER_MODULE,
        "        if previous is None:\n            return\n        pending",
        "        return\n        pending",
    ),
    Defect(
        "a sink's batch is written without checking the lease",
        FOLLOWER,
        "        if core is None or core.reading is None or not core.lease_valid(self.clock()):\n",
        "        if core is None or core.reading is None:\n",
    ),
    Defect(
        "the lease guard never stops a query",
        READING,
        "            if run not in self._lapse_stopped and query.isActive:\n",
        "            if False:\n",
    ),
    Defect(
        "the loop does not learn that the guard stopped its query",
        FOLLOWER,
        "            core.lease_lapsed = True  # the guard stopped it",
        "            pass  # the guard stopped it",
    ),
)
