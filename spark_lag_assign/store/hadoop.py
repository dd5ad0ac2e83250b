"""The directory store's file system on Hadoop: ``hdfs://`` (and ``viewfs://``, ``webhdfs://``).

Which client, and why: Hadoop's own Java ``FileSystem`` API, reached through py4j in a JVM
that PySpark provides. It is the client Spark itself uses, so the cluster's own Hadoop
configuration applies unchanged (``HADOOP_CONF_DIR``, ``spark.hadoop.*``, HA nameservices,
viewfs mount tables, Kerberos tickets and delegation tokens, ``HADOOP_USER_NAME``) and it
needs nothing that PySpark does not already ship (``hadoop-client-api`` at the version
PySpark bundles). Python HDFS clients either speak WebHDFS only (``hdfs``/HdfsCLI: no
exclusive no-overwrite rename of directories, a second set of endpoints and credentials to
configure) or need ``libhdfs`` and a Hadoop installation on every host (``pyarrow.fs``).

The JVM: the active SparkSession's gateway when there is one (its ``hadoopConfiguration``,
which carries ``spark.hadoop.*``), otherwise one gateway per process from
``pyspark.java_gateway.launch_gateway()`` (a JVM without a SparkContext, ~3 s to start; its
Hadoop ``Configuration`` reads ``core-site.xml``/``hdfs-site.xml`` from ``HADOOP_CONF_DIR``,
which spark-submit puts on its classpath). Each store has its own ``FileSystem`` instance
(``FileSystem.newInstance``), so two store objects are two HDFS clients with two leases, as
two hosts would be, and closing a store never closes Spark's cached instance.

Atomicity, as ``spark_lag_assign.store.fs.FileSystem`` requires:

- exclusive create of a complete file: the data goes to a temp file
  (``.<name>.<uuid>.tmp`` beside it, created with ``overwrite=false``), which is closed,
  then renamed to the final name with ``Options.Rename.NONE``. The NameNode performs that
  rename atomically and refuses it if the name exists, so of two racing creators exactly
  one wins, and a name, once visible, always holds a whole, closed file. (Creating the
  final name directly would let readers see it empty while it is written, and a writer that
  died mid-create would leave the name locked until its lease is recovered.) A writer that
  dies mid-create leaves only its temp file, which the store removes once it is stale;
  nothing under a final name ever needs ``recoverLease``.
- rename: ``rename(src, dst, Options.Rename.NONE)`` (``rename2``), which fails if ``dst``
  exists, file or directory, instead of moving ``src`` into a directory as the old
  ``rename`` does.
- read, list, delete, mkdirs: the plain calls. A file that exists but cannot be read
  (blocks missing, a file still under construction by a dead writer, bad checksums)
  raises ``UnreadableFileError``, which the store reports as damage rather than failure.
- no symlinks: the store's convenience links are local-only.

Java failures become ``OSError``s with one short line ("permission denied: user=...",
"NameNode at HOST:PORT unreachable (Connection refused)"), which the store turns into a
``StoreError`` naming the store and the step that failed.
"""

from __future__ import annotations

import errno
import logging
import threading
import uuid
from collections.abc import Mapping
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from spark_lag_assign.errors import ConfigError
from spark_lag_assign.store.fs import Entry, FileSystem, UnreadableFileError

log = logging.getLogger(__name__)

_lock = threading.Lock()
_own_gateway: Any = None

_PERMISSION = {"AccessControlException", "AccessDeniedException", "AuthorizationException"}
_UNREACHABLE = {
    "ConnectException",
    "ConnectTimeoutException",
    "NoRouteToHostException",
    "UnknownHostException",
    "SocketTimeoutException",
    "UnresolvedAddressException",
}
_EXISTS = {"FileAlreadyExistsException", "AlreadyBeingCreatedException", "RecoveryInProgressException"}
_UNREADABLE = {
    "BlockMissingException",
    "CannotObtainBlockLengthException",
    "ChecksumException",
    "LeaseExpiredException",
    "EOFException",
}


def gateway_and_conf() -> tuple[Any, Any]:
    """A py4j gateway and a fresh copy of the Hadoop configuration to use with it."""
    global _own_gateway
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - pyspark is a dependency
        raise ConfigError("hdfs:// stores need PySpark (its JVM reaches Hadoop's file systems)") from None
    context = None
    try:
        session = SparkSession.getActiveSession()
        context = session.sparkContext if session is not None else SparkContext._active_spark_context
        if context is not None:
            gateway: Any = context._gateway
            return gateway, gateway.jvm.org.apache.hadoop.conf.Configuration(context._jsc.hadoopConfiguration())
    except Exception as exc:  # noqa: BLE001 - Spark Connect has no JVM here; a stopped context has none either
        log.debug("no usable SparkContext for Hadoop (%s); using a gateway of our own", exc)
    with _lock:
        if _own_gateway is None:
            from pyspark.java_gateway import launch_gateway

            _own_gateway = launch_gateway()
        gateway = _own_gateway
    return gateway, gateway.jvm.org.apache.hadoop.conf.Configuration()


def _java(exc: BaseException) -> tuple[str, str, str]:
    """(simple class name, first line of the message, root cause's message) of a Java exception."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return type(exc).__name__, " ".join(str(exc).split())[:300], ""
    name = str(java.getClass().getName())
    if name == "org.apache.hadoop.ipc.RemoteException":
        name = str(java.getClassName())
    message = str(java.getMessage() or "").strip().splitlines()
    root, cause = java, java.getCause()
    for _ in range(10):
        if cause is None:
            break
        root, cause = cause, cause.getCause()
    root_message = str(root.getMessage() or "").strip().splitlines()
    return name.rsplit(".", 1)[-1].rsplit("$", 1)[-1], (message[0] if message else ""), (root_message[0] if root_message else "")


class HadoopFileSystem(FileSystem):
    """A directory store's ``FileSystem`` on any Hadoop file system, through Hadoop's Java API."""

    def __init__(self, uri: str, conf: Mapping[str, str] | None = None, *, user: str | None = None) -> None:
        """``conf``: Hadoop settings over the cluster's own. ``user``: act as this user on a
        cluster without Kerberos (what ``HADOOP_USER_NAME`` does for the whole process)."""
        from py4j.protocol import Py4JError

        self._Py4JError = Py4JError
        self.uri = uri
        parts = urlsplit(uri)
        self.authority = parts.netloc or "(default)"
        self._gateway, hadoop_conf = gateway_and_conf()
        for key, value in (conf or {}).items():
            hadoop_conf.set(str(key), str(value))
        jvm = self._gateway.jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._IOUtils = jvm.org.apache.hadoop.io.IOUtils
        self._ByteArrayOutputStream = jvm.java.io.ByteArrayOutputStream
        rename = jvm.org.apache.hadoop.fs.Options.Rename
        self._no_overwrite = self._gateway.new_array(rename, 1)
        self._no_overwrite[0] = rename.NONE
        java_uri = jvm.java.net.URI(f"{parts.scheme}://{parts.netloc}/")
        try:
            if user is None:
                self._fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(java_uri, hadoop_conf)
            else:
                self._fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(java_uri, hadoop_conf, user)
            self._context = None
            if str(self._fs.getClass().getName()) != "org.apache.hadoop.hdfs.DistributedFileSystem":
                # rename-with-options is public only on HDFS's own class; FileContext has it everywhere
                self._context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(java_uri, hadoop_conf)
        except Py4JError as exc:
            raise self._error(exc, uri) from None
        self._closed = False

    def __repr__(self) -> str:
        return f"HadoopFileSystem({self.uri!r})"

    # -- errors

    def _error(self, exc: BaseException, path: str) -> OSError:
        name, message, root = _java(exc)
        if name in _PERMISSION:
            detail = message.removeprefix("Permission denied: ").removeprefix("Permission denied")
            return PermissionError(errno.EACCES, f"permission denied: {detail}".rstrip(": "), path)
        if name in _UNREACHABLE:
            return ConnectionError(errno.ECONNREFUSED, f"NameNode at {self.authority} unreachable ({root or name})", path)
        if name == "FileNotFoundException":
            return FileNotFoundError(errno.ENOENT, f"not found: {message}" if message else "not found", path)
        if "Filesystem closed" in message:
            return OSError(errno.EBADF, "the store was closed", path)
        return OSError(errno.EIO, f"{name}: {message}" if message else name, path)

    def _path(self, path: str) -> Any:
        return self._Path(path)

    # -- the operations

    def mkdirs(self, path: str) -> None:
        try:
            if not self._fs.mkdirs(self._path(path)):
                raise OSError(errno.EIO, "mkdirs refused", path)
        except self._Py4JError as exc:
            raise self._error(exc, path) from None

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        out = self._fs.create(self._path(path), overwrite)
        try:
            if data:
                out.write(bytearray(data))
        finally:
            out.close()  # a closed HDFS file has every block complete on its DataNodes

    def write(self, path: str, data: bytes) -> None:
        try:
            self._write(path, data, True)
        except self._Py4JError as exc:
            raise self._error(exc, path) from None

    def create(self, path: str, data: bytes) -> bool:
        directory, name = path.rsplit("/", 1)
        tmp = f"{directory}/.{name}.{uuid.uuid4().hex}.tmp"
        try:
            self._write(tmp, data, False)
        except self._Py4JError as exc:
            raise self._error(exc, path) from None  # a temp file left behind is removed when stale
        moved = False
        try:
            moved = self._rename(tmp, path)
            return moved
        except self._Py4JError as exc:
            raise self._error(exc, path) from None
        finally:
            if not moved:
                try:
                    self._fs.delete(self._path(tmp), False)
                except self._Py4JError as exc:
                    log.debug("cannot remove %s: %s", tmp, _java(exc)[1])

    def _rename(self, src: str, dst: str) -> bool:
        try:
            if self._context is None:
                self._fs.rename(self._path(src), self._path(dst), self._no_overwrite)
            else:
                self._context.rename(self._path(src), self._path(dst), self._no_overwrite)
        except self._Py4JError as exc:
            if _java(exc)[0] in _EXISTS:
                return False
            raise
        return True

    def rename(self, src: str, dst: str) -> bool:
        try:
            return self._rename(src, dst)
        except self._Py4JError as exc:
            raise self._error(exc, src) from None

    def read(self, path: str) -> bytes | None:
        try:
            stream = self._fs.open(self._path(path))
        except self._Py4JError as exc:
            error = self._error(exc, path)
            if isinstance(error, FileNotFoundError):
                return None
            if _java(exc)[0] in _UNREADABLE:
                raise UnreadableFileError(errno.EIO, f"unreadable ({_java(exc)[0]})", path) from None
            raise error from None
        try:
            out = self._ByteArrayOutputStream()
            self._IOUtils.copyBytes(stream, out, 65536, True)
            return bytes(out.toByteArray())
        except self._Py4JError as exc:
            error = self._error(exc, path)
            if isinstance(error, (PermissionError, ConnectionError)) or "closed" in (error.strerror or ""):
                raise error from None
            # the name exists, its bytes cannot be had: damage, not a failure of the store
            raise UnreadableFileError(errno.EIO, f"unreadable ({error.strerror})", path) from None
        finally:
            with suppress(self._Py4JError):
                stream.close()

    def list(self, path: str) -> list[Entry]:
        try:
            statuses = self._fs.listStatus(self._path(path))
            return [Entry(str(s.getPath().getName()), bool(s.isDirectory()), s.getModificationTime() / 1000.0) for s in statuses]
        except self._Py4JError as exc:
            error = self._error(exc, path)
            if isinstance(error, FileNotFoundError):
                return []
            raise error from None

    def delete(self, path: str, recursive: bool = False) -> bool:
        try:
            return bool(self._fs.delete(self._path(path), recursive))
        except self._Py4JError as exc:
            error = self._error(exc, path)
            if isinstance(error, FileNotFoundError):
                return False
            raise error from None

    def replace(self, path: str, data: bytes, atomic: bool = True) -> None:
        """Write a whole file over whatever is there: a closed temp file renamed over the name
        (readers see the old file or the new one), or, with ``atomic=False`` (object stores,
        whose rename is a copy), one plain write, which they publish whole at close."""
        if not atomic:
            self.write(path, data)
            return
        directory, name = path.rsplit("/", 1)
        tmp = f"{directory}/.{name}.{uuid.uuid4().hex}.tmp"
        rename = self._gateway.jvm.org.apache.hadoop.fs.Options.Rename
        overwrite = self._gateway.new_array(rename, 1)
        overwrite[0] = rename.OVERWRITE
        try:
            self._write(tmp, data, False)
            if self._context is None:
                self._fs.rename(self._path(tmp), self._path(path), overwrite)
            else:
                self._context.rename(self._path(tmp), self._path(path), overwrite)
        except self._Py4JError as exc:
            error = self._error(exc, path)
            with suppress(self._Py4JError):
                self._fs.delete(self._path(tmp), False)
            raise error from None

    def recover_lease(self, path: str) -> bool:
        """Ask the NameNode to close a file a dead writer left open (HDFS only): True once it
        is closed. The store never needs it (final names are only ever renamed into place);
        it is here for operators and tests."""
        try:
            return bool(self._fs.recoverLease(self._path(path)))
        except self._Py4JError as exc:
            raise self._error(exc, path) from None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._fs.close()
            except self._Py4JError as exc:
                log.debug("closing %s: %s", self.uri, _java(exc)[1])


__all__ = ["HadoopFileSystem", "gateway_and_conf"]
