"""The three layers of the configuration and their merge: a TOML file < the environment <
the command line, each key typed by pydantic models (``spark_lag_assign.config`` says how,
and checks the rules across keys)."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from spark_lag_assign.core.lists import comma_list
from spark_lag_assign.errors import ConfigError

ENV_PREFIX = "SPARK_LAG_ASSIGN_"


def _comma_list_if_text(value: Any) -> Any:
    return comma_list(value) if isinstance(value, str) else value


_CommaList = Annotated[list[str], BeforeValidator(_comma_list_if_text)]
_Positive = Annotated[int, Field(gt=0)]


class KafkaKeys(BaseModel):
    """``[kafka]``: where the offsets come from when planning live."""

    model_config = ConfigDict(extra="forbid", strict=True)

    bootstrap_servers: str | None = None
    group: str | None = None
    topics: _CommaList | None = None
    topic_pattern: str | None = None
    timeout_ms: _Positive | None = None
    client: dict[str, Any] | None = None
    client_env: dict[str, str] | None = None


class PlanKeys(BaseModel):
    """``[plan]``: what to plan, how, and where to publish it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    output: str | None = None
    history: Annotated[int, Field(ge=1)] | None = None
    strategy: str | None = None
    reset: str | None = None
    seed: int | None = None
    consumers: _CommaList | None = None
    subscriptions: str | dict[str, Any] | None = None  # a JSON file, or a table; checked by _subscriptions
    options: dict[str, Any] | None = None
    offsets: str | None = None
    offsets_later: str | None = None
    interval: float | None = None
    rate: float | None = None
    rates: str | None = None
    allow_shrink: bool | None = None
    fencing_change: bool | None = None
    fencing: Literal["self", "service"] | None = None
    # metrics of the run, and sizing the group for a deadline
    metrics_file: str | None = None  # node_exporter's textfile collector format
    pushgateway: str | None = None  # a Pushgateway URL: the run's metrics, grouped by job and store
    drain_within: str | float | None = None  # a duration: "45m", "1h30m", "90s" or seconds
    size_to_deadline: bool | None = None  # publish the plan for the pipelines the deadline needs
    pinned: _CommaList | None = None  # pipelines sizing keeps in whatever the deadline (else: fastest first)


class FileKeys(BaseModel):
    """A whole config file: unknown sections and keys are errors (they are usually typos)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kafka: KafkaKeys = KafkaKeys()
    plan: PlanKeys = PlanKeys()
    spark: dict[str, str | int | float | bool] = {}  # free-form Spark settings


class Layer(KafkaKeys, PlanKeys):
    """The environment's or the command line's values: the keys of [kafka] and [plan] together."""


#: keys that the environment may set (tables and secrets stay in the file)
ENV_KEYS = tuple(k for k in Layer.model_fields if k not in ("client", "client_env", "options"))
_FLAGS = {"output": "--output", "client": "--kafka-option", "options": "--option"}
# a layer that gives one of a pair replaces a lower layer's other one
_ALTERNATIVES = (("offsets", "bootstrap_servers"), ("consumers", "subscriptions"), ("rate", "rates"))


def flag(key: str) -> str:
    """The command-line flag of a key: ``timeout_ms`` -> ``--timeout-ms``."""
    return _FLAGS.get(key, "--" + key.replace("_", "-"))


def _problem(exc: ValidationError) -> tuple[tuple[Any, ...], str]:
    """(location, what is wrong) of a model's first error, as one line."""
    error = exc.errors(include_url=False)[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    if error["type"] != "missing" and "input" in error:
        message += f", not {error['input']!r}"
    return tuple(error["loc"]), " ".join(message.split())


def load_file(path: str | Path) -> FileKeys:
    """A config file, its keys checked and typed; unknown sections or keys are errors."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown = sorted(set(doc) - set(FileKeys.model_fields))
    if unknown:
        raise ConfigError(f"{path}: unknown section [{unknown[0]}]; known: {', '.join(FileKeys.model_fields)}")
    for section in ("kafka", "plan"):
        if section in doc and isinstance(doc[section], dict):
            extra = sorted(set(doc[section]) - set(FileKeys.model_fields[section].annotation.model_fields))  # type: ignore[union-attr]
            if extra:
                raise ConfigError(f"{path}: unknown key(s) in [{section}]: {', '.join(extra)}")
    try:
        return FileKeys.model_validate(doc)
    except ValidationError as exc:
        loc, message = _problem(exc)
        if len(loc) == 1:
            raise ConfigError(f"{path}: [{loc[0]}] must be a table of keys") from None
        section, key = loc[0], loc[1]
        if key == "subscriptions":
            raise ConfigError(
                f"{path}: [{section}] subscriptions must name a JSON file or be a table of consumer = [topics]"
            ) from None
        if key in ("client", "client_env", "options") and len(loc) > 2:
            raise ConfigError(f"{path}: [{section}.{key}] {'.'.join(map(str, loc[2:]))}: {message}") from None
        raise ConfigError(f"{path}: [{section}] {key}: {message}") from None


def _layer(values: Mapping[str, Any], origin: Callable[[str], str], *, strict: bool) -> dict[str, Any]:
    """One layer's values, typed: the keys it gives (None means "not given")."""
    given = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in values.items() if v is not None}
    unknown = sorted(set(given) - set(Layer.model_fields))
    if unknown:
        raise ConfigError(f"{origin(unknown[0])}: not a configuration key")
    try:
        layer = Layer.model_validate(given, strict=strict)
    except ValidationError as exc:
        loc, message = _problem(exc)
        raise ConfigError(f"{origin(str(loc[0]))}: {message}") from None
    return {k: getattr(layer, k) for k in given}


def environment_layer(environ: Mapping[str, str]) -> dict[str, str]:
    """``SPARK_LAG_ASSIGN_<KEY>`` variables, by key (only the keys that the environment may set;
    an empty variable counts as unset, as a shell's ``VAR=`` usually means)."""
    known = {ENV_PREFIX + k.upper(): k for k in ENV_KEYS}
    return {known[name]: value for name, value in environ.items() if name in known and value.strip()}


@dataclass
class Merged:
    """The layers merged: each key's value and the place it came from (for error messages)."""

    values: dict[str, Any]
    origins: dict[str, str]
    spark: dict[str, str]
    client_env: dict[str, str]
    file_client: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def origin(self, key: str) -> str:
        return self.origins.get(key, key)


def merge(file: str | Path | None, environ: Mapping[str, str] | None, overrides: Mapping[str, Any]) -> Merged:
    """file < environment < command line, key by key; ``[kafka.client]`` and ``[plan.options]``
    merge key by key too. Every value is typed; cross-key rules are the caller's."""
    layers: list[tuple[dict[str, Any], Callable[[str], str]]] = []
    spark: dict[str, str] = {}
    client_env: dict[str, str] = {}
    file_client: dict[str, Any] = {}
    if file is not None:
        doc = load_file(file)
        # one file is one layer: its [plan] offsets and its [kafka] bootstrap_servers clash
        sections = {k: s for s in ("kafka", "plan") for k in getattr(doc, s).model_fields_set}
        given = {k: getattr(getattr(doc, s), k) for k, s in sections.items()}
        layers.append((given, lambda k: f"{file}: [{sections.get(k, 'plan')}] {k}"))
        spark = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in doc.spark.items()}
        client_env = dict(doc.kafka.client_env or {})
        file_client = dict(doc.kafka.client or {})
    env = environment_layer(os.environ if environ is None else environ)
    layers.append((_layer(env, lambda k: ENV_PREFIX + k.upper(), strict=False), lambda k: ENV_PREFIX + k.upper()))
    cli = dict(overrides)
    if cli.get("client_env") is not None:
        raise ConfigError("client_env names secrets' environment variables: it belongs in the config file's [kafka.client_env]")
    given_client = cli.pop("client", None)  # --kafka-option: key by key, after the file's secrets
    layers.append((_layer(cli, flag, strict=False), flag))

    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for given, origin in layers:
        for one, other in (*_ALTERNATIVES, *((b, a) for a, b in _ALTERNATIVES)):
            if one in given and other not in given:
                values.pop(other, None)
                origins.pop(other, None)
        for key, value in given.items():
            if key in ("client", "client_env"):
                continue
            if key == "options":
                for name, option in value.items():
                    values.setdefault("options", {})[name] = option
                    text = option if isinstance(option, str) else json.dumps(option)  # as it was typed
                    origins[f"options.{name}"] = (
                        f"{flag('options')} {name}={text}" if origin is flag else f"{file}: [plan.options] {name}"
                    )
                continue
            values[key] = value
            origins[key] = origin(key)
    if given_client:
        values["client"] = dict(given_client)
    return Merged(values, origins, spark, client_env, file_client)


__all__ = [
    "ENV_KEYS",
    "ENV_PREFIX",
    "FileKeys",
    "KafkaKeys",
    "Layer",
    "Merged",
    "PlanKeys",
    "environment_layer",
    "flag",
    "load_file",
    "merge",
]
