"""Where imported files live: one storage root (`ITSMREVIEW_STORAGE_URL`), a local folder or
an S3 prefix, addressed by relative keys.

The database stores keys relative to the root, never absolute paths, so every replica that
shares the database and the storage (under whatever local path it sees it) finds the same
files. Keys are checked like every path from outside (`files.relative_parts`): no absolute
path, drive, `..` segment, NUL, or overlong name. Parquet is read through a pyarrow file
system (a pyarrow dataset over fsspec for S3), so column and row filters stay columnar.
"""

import contextlib
import os
import threading
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from itsmreview.errors import InvalidInput, NotFound
from itsmreview.files import UnsafePath, relative_parts, safe_join
from itsmreview.settings import get_settings

SCHEMES = ("file", "s3")


@dataclass(frozen=True)
class Storage:
    """A storage root. `scheme` is `file` (root: an absolute local folder) or `s3` (root:
    `bucket/prefix`). Build one with `storage_from_url` or `get_storage`."""

    scheme: str
    root: str
    url: str

    # keys -----------------------------------------------------------------------------------
    def key(self, *parts: str) -> str:
        """The key `parts` joined with '/', checked. Raises InvalidInput naming what is wrong."""
        text = "/".join(str(p) for p in parts)
        try:
            return "/".join(relative_parts(text))
        except UnsafePath as exc:
            raise InvalidInput(f"storage key {exc}") from None

    def path(self, *parts: str) -> str:
        """The full path of a key in this storage's file system (a local path, or
        `bucket/prefix/key` for S3). Raises InvalidInput for a hostile key, or (local) one
        that a link leads out of the root."""
        key = self.key(*parts)
        if self.scheme == "file":
            try:
                return str(safe_join(Path(self.root), key))
            except UnsafePath as exc:
                raise InvalidInput(f"storage key {exc}") from None
        return f"{self.root}/{key}"

    def location(self) -> str:
        """The root as a person reads it (in messages)."""
        return self.root if self.scheme == "file" else f"s3://{self.root}"

    # file systems -----------------------------------------------------------------------------
    @cached_property
    def fs(self):
        """The fsspec file system."""
        if self.scheme == "file":
            from fsspec.implementations.local import LocalFileSystem

            return LocalFileSystem(auto_mkdir=True)
        try:
            import s3fs
        except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
            raise InvalidInput(
                f"ITSMREVIEW_STORAGE_URL={self.url} needs s3fs: pip install s3fs"
            ) from None
        options: dict[str, Any] = {}
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            options["region_name"] = region
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            options["endpoint_url"] = endpoint
        # no listing cache: other replicas write and delete under the same prefix
        return s3fs.S3FileSystem(
            client_kwargs=options, use_listings_cache=False, skip_instance_cache=True
        )

    @cached_property
    def arrow_fs(self):
        """A pyarrow file system over the same storage, for columnar parquet reads."""
        import pyarrow.fs as pafs

        if self.scheme == "file":
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    # reading --------------------------------------------------------------------------------
    def exists(self, *parts: str) -> bool:
        return bool(self.fs.exists(self.path(*parts)))

    def open(self, *parts: str, mode: str = "rb") -> IO:
        """A file of the storage opened for reading. Raises NotFound when it is missing."""
        path = self.path(*parts)
        try:
            return self.fs.open(path, mode)
        except FileNotFoundError:
            raise NotFound(f"{self._shown(path)} is missing from the storage") from None

    def read_table(self, *parts: str, columns=None, filters=None):
        """The parquet file at a key as a pyarrow Table: only `columns`, only the row groups
        and rows `filters` (pyarrow's DNF) keep. Raises NotFound when it is missing."""
        import pyarrow.parquet as pq

        path = self.path(*parts)
        try:
            return pq.read_table(path, columns=columns, filters=filters, filesystem=self.arrow_fs)
        except FileNotFoundError:
            raise NotFound(f"{self._shown(path)} is missing from the storage") from None

    def read_schema(self, *parts: str):
        """The schema of the parquet file at a key (its footer only)."""
        import pyarrow.parquet as pq

        path = self.path(*parts)
        try:
            return pq.read_schema(path, filesystem=self.arrow_fs)
        except FileNotFoundError:
            raise NotFound(f"{self._shown(path)} is missing from the storage") from None

    def list(self, prefix: str) -> list[str]:
        """The keys of the files below `prefix`, sorted."""
        base = self.path(prefix)
        found = self.fs.find(base, detail=True) if self.fs.exists(base) else {}
        root = self.root.rstrip("/") + "/"
        keys = []
        for item, info in found.items():
            if info.get("type") == "directory":
                continue  # an empty folder some S3 servers (SeaweedFS) keep after a delete
            item = str(item)
            if self.scheme == "file":
                item = Path(item).relative_to(Path(self.root)).as_posix()
                keys.append(item)
            elif item.startswith(root):
                keys.append(item[len(root) :])
        return sorted(keys)

    def download(self, target: Path, *parts: str) -> Path:
        """Copy the file at a key to the local path `target`, streamed. NotFound when missing."""
        path = self.path(*parts)
        try:
            self.fs.get_file(path, str(target))
        except FileNotFoundError:
            raise NotFound(f"{self._shown(path)} is missing from the storage") from None
        return target

    # writing --------------------------------------------------------------------------------
    def upload(self, source: Path, *parts: str) -> None:
        """Copy the local file `source` to a key, streamed (parents are made as needed)."""
        path = self.path(*parts)
        if self.scheme == "file":
            if Path(path).resolve() == Path(source).resolve():
                return  # already there (an export's zip in the data folder that is the storage)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.fs.put_file(str(source), path)

    def upload_tree(self, source: Path, *parts: str) -> int:
        """Copy the local file or folder `source` to the key `parts/<source's name>`, every
        file below a folder at its relative key; the number of files copied. Raises
        InvalidInput for a link inside the folder that leads out of it."""
        if not source.is_dir():
            self.upload(source, *parts, source.name)
            return 1
        root = source.resolve()
        entries = sorted(source.rglob("*"))
        for entry in entries:
            if not entry.resolve().is_relative_to(root):
                raise InvalidInput(
                    f"{entry}: a link out of {source}; copy what it points to into the folder"
                )
        files = [entry for entry in entries if entry.is_file()]
        for file in files:
            self.upload(file, *parts, source.name, file.relative_to(source).as_posix())
        return len(files)

    def download_tree(self, target: Path, prefix: str) -> None:
        """Copy every file below the key `prefix` into the local folder `target`, each at its
        key relative to `prefix`. Raises InvalidInput for a key that would leave `target`."""
        base = self.key(prefix) + "/"
        for key in self.list(prefix):
            try:
                local = safe_join(target, key[len(base) :])
            except UnsafePath as exc:
                raise InvalidInput(f"storage key {exc}") from None
            local.parent.mkdir(parents=True, exist_ok=True)
            self.download(local, key)

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Write one file at a key (parents are made as needed)."""
        self.fs.pipe_file(self.path(*parts), data)

    def write_frame(self, frame, *parts: str) -> None:
        """Write a pandas frame as parquet at a key, without its index."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.path(*parts)
        if self.scheme == "file":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table, path, filesystem=self.arrow_fs)

    def delete(self, prefix: str) -> None:
        """Remove every file below `prefix` (and the prefix itself); a missing one is fine."""
        path = self.path(prefix)
        try:
            if self.fs.exists(path):
                self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass

    def _shown(self, path: str) -> str:
        return path if self.scheme == "file" else f"s3://{path}"


def storage_from_url(url: str | None, *, data_dir: Path | None = None) -> Storage:
    """The storage `url` names: a local folder (a path or `file:///path`), or
    `s3://bucket/prefix`; None or empty: `data_dir`. Raises InvalidInput for another scheme
    or an S3 URL without a bucket."""
    if not url:
        folder = Path(data_dir if data_dir is not None else get_settings().data_dir)
        return Storage("file", str(folder.absolute()), str(folder))
    parsed = urlparse(url)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        folder = Path(parsed.path if parsed.scheme == "file" else url)
        return Storage("file", str(folder.absolute()), url)
    if parsed.scheme == "s3":
        bucket, prefix = parsed.netloc, parsed.path.strip("/")
        if not bucket:
            raise InvalidInput(
                f"ITSMREVIEW_STORAGE_URL={url}: no bucket; use s3://bucket or s3://bucket/prefix"
            )
        if prefix:
            try:
                prefix = "/".join(relative_parts(prefix))
            except UnsafePath as exc:
                raise InvalidInput(f"ITSMREVIEW_STORAGE_URL={url}: the prefix {exc}") from None
        return Storage("s3", f"{bucket}/{prefix}" if prefix else bucket, url)
    raise InvalidInput(
        f"ITSMREVIEW_STORAGE_URL={url}: unknown scheme {parsed.scheme!r}; use a local folder, "
        "file:///folder or s3://bucket/prefix"
    )


@lru_cache(maxsize=8)
def _storage_for(url: str | None, data_dir: str) -> Storage:
    return storage_from_url(url, data_dir=Path(data_dir))


def get_storage() -> Storage:
    """The configured storage (ITSMREVIEW_STORAGE_URL, by default the data folder)."""
    settings = get_settings()
    return _storage_for(settings.storage_url or None, str(settings.data_dir))


_warming = threading.Lock()
_warmed: set[str] = set()


def warm_up_in_background() -> None:
    """Open the configured S3 storage's client on a thread, once per process: importing
    s3fs and botocore and making the client take about half a second, which a server's
    first page would otherwise wait for (it starts while the login page is drawn). A local
    storage needs nothing."""
    storage = get_storage()
    with _warming:
        if storage.scheme != "s3" or storage.url in _warmed:
            return
        _warmed.add(storage.url)
    threading.Thread(target=_warm, args=(storage,), name="storage-warm-up", daemon=True).start()


def _warm(storage: Storage) -> None:
    with contextlib.suppress(Exception):  # pages report a storage that does not answer
        storage.fs.exists(storage.root)
        storage.arrow_fs  # noqa: B018 - made now, not on the first read
