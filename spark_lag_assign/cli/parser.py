"""The ``spark-lag-assign`` command line's arguments: every subcommand and its flags
(``spark_lag_assign.cli`` runs them)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from spark_lag_assign import __version__
from spark_lag_assign.errors import ConfigError

#: flags whose value may look like a negative number: argparse would take "-5m" for a flag
NEGATIVE_VALUED = ("--drain-within",)


def negative_values_joined(argv: Sequence[str]) -> list[str]:
    """``--drain-within -5m`` as ``--drain-within=-5m``: argparse takes a word that starts with
    "-" for a flag, so a negative deadline would get its "expected one argument" (exit 2)
    instead of the deadline's own one line (exit 1)."""
    joined: list[str] = []
    for word in argv:
        if joined and joined[-1] in NEGATIVE_VALUED and re.match(r"-\.?\d", word):
            joined[-1] = f"{joined[-1]}={word}"
        else:
            joined.append(word)
    return joined


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake reported in one line (exit status 2, as argparse's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"spark-lag-assign: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def key_values(pairs: Sequence[str] | None, what: str) -> dict[str, Any] | None:
    """``["k=v", ...]`` -> dict; values are read as JSON where they parse (numbers, booleans)."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {pair!r} is not KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="a TOML config file (see conf/)")
    p.add_argument("--bootstrap-servers", metavar="HOSTS", help="live: the cluster's bootstrap servers")
    p.add_argument("--group", metavar="G", help="live: the consumer group whose offsets to read")
    p.add_argument("--topics", metavar="A,B", help="the topics to plan")
    p.add_argument("--topic-pattern", metavar="REGEX", help="plan every topic matching this regex")
    p.add_argument("--kafka-option", metavar="K=V", action="append", help="a kafka-python client option (repeatable)")
    p.add_argument("--timeout-ms", metavar="MS", help="how long to wait for the cluster (default 15000)")


def _add_sizing(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--drain-within", metavar="DURATION",
        help="how many pipelines (fastest first) drain the backlog within DURATION (45m, 1h30m, 90s)",
    )  # fmt: skip
    p.add_argument("--pinned", metavar="A,B", help="pipelines that sizing keeps whatever the deadline (then the fastest)")


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and flag. Long because it is a list of
    declarations, one per flag, which reads best in one place beside ``--help``'s order."""
    parser = _Parser(
        prog="spark-lag-assign",
        description="Plan which consumer reads which Kafka partitions so that lag is spread evenly.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser(
        "plan",
        help="plan and write the next generation of the plan",
        epilog="Each option can also come from the --config file or from an environment variable "
        "SPARK_LAG_ASSIGN_<KEY> (SPARK_LAG_ASSIGN_OUTPUT, SPARK_LAG_ASSIGN_TIMEOUT_MS, ...): "
        "file < environment < command line.",
    )
    _add_source(p)
    p.add_argument("--offsets", metavar="FILE", help="offline: an offsets snapshot (.csv, .jsonl, .parquet)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--consumers", metavar="C0,C1", help="consumer ids, each subscribed to every planned topic")
    who.add_argument("--subscriptions", metavar="FILE", help='JSON {"consumer": ["topic", ...]}')
    p.add_argument("--strategy", metavar="NAME", help="range, roundrobin, lag, shuffle, sticky, lag-sticky (default), drain")
    p.add_argument(
        "--offsets-later",
        metavar="FILE",
        help="offline: a second snapshot, taken --interval seconds after --offsets: produce rates, and the backlog to plan",
    )
    p.add_argument("--interval", metavar="SECONDS", help="seconds between --offsets and --offsets-later")
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--rate", metavar="N", help="records per second every consumer reads (when not measured)")
    speed.add_argument(
        "--rates", metavar="FILE", help="records per second per consumer: CSV or JSON (consumer, records_per_second)"
    )
    p.add_argument("--reset", choices=["earliest", "latest", "none"], help="the group's auto.offset.reset (default latest)")
    p.add_argument("--seed", help="seed of the shuffle strategy (default 0)")
    p.add_argument("--history", metavar="N", help="generations the store keeps readable (default 20)")
    p.add_argument("--option", metavar="K=V", action="append", help="a strategy option, e.g. tolerance=0.05")
    p.add_argument(
        "--output", "--store", dest="output", metavar="STORE",
        help="where plans live: a plan directory or kafka://HOST:PORT/NAME (its newest plan is the previous one)",
    )  # fmt: skip
    p.add_argument(
        "--allow-shrink", action="store_true", default=None,
        help="publish even a plan that drops more than half of the previous plan's partitions (plan.allow_shrink)",
    )  # fmt: skip
    p.add_argument(
        "--fencing", choices=("self", "service"),
        help="who fences a pipeline whose lease ran out: the one taking over (self, default) or a running "
        "`spark-lag-assign fencer` (service: pipelines then need WRITE on their own commit id only; plan.fencing)",
    )  # fmt: skip
    p.add_argument(
        "--fencing-change", action="store_true", default=None,
        help="publish a plan whose --fencing differs from the previous plan's, with every pipeline stopped "
        "(plan.fencing_change)",
    )  # fmt: skip
    p.add_argument("--master", metavar="URL", help="Spark master of the local session (default local[2])")
    p.add_argument("--timings", action="store_true", help="print the time of each phase (read, plan in Spark, check, write)")
    p.add_argument(
        "--metrics-file", metavar="PATH",
        help="write the run's Prometheus metrics there, in node_exporter's textfile format (plan.metrics_file)",
    )  # fmt: skip
    p.add_argument(
        "--pushgateway", metavar="URL",
        help="push the run's metrics to this Prometheus Pushgateway, grouped by job and store (plan.pushgateway)",
    )  # fmt: skip
    _add_sizing(p)
    p.add_argument(
        "--size-to-deadline", action="store_true", default=None,
        help="publish drain's plan for the pipelines --drain-within needs (needs --strategy drain)",
    )  # fmt: skip

    s = sub.add_parser("snapshot", help="save a live group's offsets to a file, to replay offline")
    _add_source(s)
    s.add_argument("--output", metavar="FILE", required=True, help="where to write (.csv, .jsonl or .parquet)")

    w = sub.add_parser("show", help="print a plan with its quality metrics and what moved")
    w.add_argument("store", metavar="STORE", help="a plan directory or kafka://HOST:PORT/NAME")
    w.add_argument("--generation", type=_positive_int, metavar="N", help="an older generation instead of the current one")
    w.add_argument("--limit", type=_positive_int, default=40, metavar="N", help="consumers to list (default 40)")

    f = sub.add_parser(
        "fencer",
        help='fence lapsed pipelines\' commits on their behalf (plan.fencing = "service"); runs until stopped',
        description="With service fencing no pipeline may fence another: one fencer per store, whose principal "
        "may write every commit id of the store, fences a pipeline whose lease ran out when the pipeline taking "
        "over asks for it, after it saw the lease run out itself.",
    )
    f.add_argument("--store", required=True, metavar="STORE", help="kafka://HOST:PORT/NAME or a plan directory")
    f.add_argument("--config", metavar="FILE", help="a TOML config file: its [kafka] settings (security)")
    f.add_argument("--bootstrap-servers", metavar="HOSTS", help="the Kafka cluster of the commit ids (default: the store's)")
    f.add_argument("--kafka-option", metavar="K=V", action="append", help="a kafka-python client option (repeatable)")

    a = sub.add_parser(
        "acls",
        help="the Kafka ACLs one role of a store needs, as kafka-acls.sh lines",
        description="planner: publishes plans; pipeline: one consumer id; fencer: fences on the pipelines' behalf "
        "(--fencing service); operator: creates the topics instead of the planner.",
    )
    a.add_argument("--store", required=True, metavar="STORE", help="kafka://HOST:PORT/NAME")
    a.add_argument("--role", required=True, choices=("planner", "pipeline", "fencer", "operator"))
    a.add_argument("--principal", required=True, metavar="User:NAME", help="the principal the ACLs are for")
    a.add_argument("--consumer", metavar="ID", help="pipeline: its consumer id")
    a.add_argument("--group", metavar="G", help="planner, pipeline: the consumer group")
    a.add_argument("--topics", metavar="A,B", help="planner, pipeline: the data topics")
    a.add_argument("--fencing", choices=("self", "service"), default="self", help="the plan's fencing (default self)")

    m = sub.add_parser(
        "simulate",
        help="what if: how long each strategy's plan takes to drain the backlog (no Spark needed)",
        description="Plan the snapshot with each strategy and play every plan forward: each consumer reads "
        "--rate messages per second, shared fairly over its partitions, while producers keep appending "
        "(rates from a second snapshot). Prints, per strategy, the slowest consumers, then a comparison.",
    )
    m.add_argument("--config", metavar="FILE", help="a TOML config file: its [plan] group, snapshots, rates and options")
    m.add_argument("--offsets", metavar="FILE", required=True, help="an offsets snapshot (.csv, .jsonl, .parquet)")
    m.add_argument(
        "--offsets-later",
        metavar="FILE",
        help="a second snapshot, taken --interval seconds after --offsets: gives produce rates, and the lag to drain",
    )
    m.add_argument("--interval", metavar="SECONDS", help="seconds between the two snapshots")
    who = m.add_mutually_exclusive_group()
    who.add_argument("--consumers", metavar="C0,C1", help="consumer ids, each subscribed to every topic of the snapshot")
    who.add_argument("--subscriptions", metavar="FILE", help='JSON {"consumer": ["topic", ...]} (["*"]: every topic)')
    speed = m.add_mutually_exclusive_group()
    speed.add_argument("--rate", metavar="MSGS_PER_S", help="messages per second one consumer reads")
    speed.add_argument(
        "--rates", metavar="FILE", help="messages per second per consumer: CSV or JSON (consumer, records_per_second)"
    )
    m.add_argument("--strategies", metavar="A,B", help="the strategies to compare (default: all of them)")
    m.add_argument("--reset", choices=["earliest", "latest", "none"], help="auto.offset.reset (default latest)")
    m.add_argument("--seed", help="seed of the shuffle strategy (default 0)")
    m.add_argument("--option", metavar="K=V", action="append", help="a strategy option, given to the strategies that take it")
    m.add_argument(
        "--previous",
        metavar="STORE",
        help="a plan directory or kafka://HOST:PORT/NAME: its newest plan is simulated too (as 'current') and sticky strategies start from it",
    )
    m.add_argument(
        "--limit", type=_positive_int, default=10, metavar="N", help="slowest consumers listed per strategy (default 10)"
    )
    _add_sizing(m)
    return parser


__all__ = ["build_parser", "key_values"]
