"""Configuration: one Settings object read from ITSMREVIEW_* environment variables."""

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ITSMREVIEW_", env_file=".env", extra="ignore")

    data_dir: Path = Field(
        default=Path(".itsmreview"),
        description="Folder for the default SQLite database, materialised event files and "
        "demo data. Created on first use.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the database. Default: a SQLite file "
        "`itsmreview.db` in the data folder. PostgreSQL: `postgresql+psycopg://user@host/db`.",
    )
    storage_url: str | None = Field(
        default=None,
        description="Where imported logs' event files are stored: a local folder (a path or "
        "`file:///path`) or `s3://bucket/prefix` (endpoint, keys and region from the usual "
        "AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION). Default: "
        "the data folder. The database stores locations relative to it, so replicas that "
        "share the database must share this storage (under any local path).",
    )
    storage_lease_s: float = Field(
        default=600,
        gt=0,
        description="Seconds an import's lease on its staged files lasts; a running import "
        "renews it every third of that. Another import's cleanup removes staged files only "
        "when their import ended without publishing them or their lease expired.",
    )
    port: int = Field(default=8501, description="Port the Streamlit app listens on.")
    demo_seed: int = Field(
        default=2013, description="Seed of the synthetic demo log and demo review round."
    )
    demo_cases: int = Field(
        default=2000, description="Number of incident cases in the synthetic demo log."
    )
    max_task_file_bytes: int = Field(
        default=256 * 2**20,
        description="Largest task or transcript file (bytes) read by an import; larger files are "
        "refused before parsing.",
    )
    max_log_bytes: int = Field(
        default=4 * 2**30,
        description="Largest event log (bytes, after decompression) read by an import; larger "
        "logs are refused before or while reading, never after filling memory.",
    )
    max_log_row_bytes: int = Field(
        default=4 * 2**20,
        description="Longest row of a CSV event log (bytes); a longer row is refused with its "
        "position (real event-log rows are a few hundred bytes).",
    )
    log_memory: str | None = Field(
        default=None,
        description="Memory the log engine (DuckDB) may use while it materialises or queries "
        "a log: a size such as `4GB` or `512MiB`, or a fraction of the machine's memory such "
        "as `0.25`. Beyond it, work spills to a temporary folder. Default: half the memory.",
    )
    log_stream_bytes: int = Field(
        default=256 * 2**20,
        description="CSV event logs of this size (bytes on disk, compressed or not) or larger "
        "are imported in bounded batches through the log engine, in memory that does not grow "
        "with the number of events; smaller ones are read whole, which is faster. 0 streams "
        "every CSV log.",
    )
    timestamp_min_year: int = Field(
        default=1970, description="Earliest year an event-log timestamp may have."
    )
    timestamp_max_year: int = Field(
        default=2100, description="Latest year an event-log timestamp may have."
    )
    login_free_failures: int = Field(
        default=5,
        description="Wrong passwords allowed per account and per address before logins from "
        "them are delayed.",
    )
    login_max_delay_s: int = Field(
        default=900,
        description="Longest wait imposed after repeated wrong passwords (the wait doubles with "
        "each failure past the free ones, up to this).",
    )
    session_hours: float = Field(
        default=12,
        gt=0,
        description="How long a login lasts in a browser: a reload or a link within this time "
        "keeps the user logged in; logging out ends it at once.",
    )
    sla_hours: str | None = Field(
        default=None,
        description="Resolution targets per priority for the SLA outcome of coverage, e.g. "
        "'1=4,2=8,3=24' (hours); `coverage --sla-hours` overrides it.",
    )
    anthropic_api_key: str | None = Field(
        default=None,
        description="Key for the Anthropic API (else the SDK's own ANTHROPIC_API_KEY); model "
        "reviews and gap hints run only when a key is set, and only when a lead starts them.",
    )
    model: str = Field(
        default="claude-sonnet-4-5",
        description="Anthropic model of model reviews and gap hints (a page or `--model` may "
        "choose another).",
    )
    model_concurrency: int = Field(
        default=4, ge=1, le=64, description="Requests a model review keeps in flight at once."
    )
    model_max_retries: int = Field(
        default=4,
        ge=0,
        description="Retries of a request on rate limits (429), overload (529) and server "
        "errors, with the SDK's backoff (it honours retry-after).",
    )
    model_max_tokens: int = Field(
        default=1024, ge=256, description="Most output tokens of one model rating or hint."
    )
    model_timeout_s: float = Field(
        default=120, gt=0, description="Seconds one request may take before it is retried."
    )
    model_price_input: float | None = Field(
        default=None,
        ge=0,
        description="US dollars per million input tokens, for a model without a listed price.",
    )
    model_price_output: float | None = Field(
        default=None,
        ge=0,
        description="US dollars per million output tokens, for a model without a listed price.",
    )

    gate_apply: Literal["inline", "background", "queue"] = Field(
        default="inline",
        description="When a submitted rating reaches the approval gate (the round's agreement "
        "counts and its task's status). `inline`: in the submit itself, so the status is "
        "final when the submit returns (the CLI, scripts, a small team). `background`: a "
        "thread of this process applies submits in batches right after they commit (what "
        "`itsmreview serve` uses unless this is set): an expert's submit is a few writes, and "
        "statuses follow within a fraction of a second. `queue`: submits are only queued, "
        "for a separate `itsmreview round apply-queued --watch` process to apply.",
    )
    jobs: Literal["in-process", "worker"] = Field(
        default="in-process",
        description="Where background work runs: model reviews, log imports and exports "
        "started from the Imports and Exports pages, the figures of the lead's pages over a "
        "whole round or catalog (summaries) and (unless ITSMREVIEW_GATE_APPLY says "
        "otherwise) the approval gate's queue. `in-process`: threads of the web process that "
        "asked (one machine, SQLite). `worker`: queued in the database for `itsmreview worker` "
        "processes (several replicas; a restart of a web process interrupts nothing; a killed "
        "worker's job is taken over by another).",
    )
    job_lease_s: float = Field(
        default=60.0,
        gt=0,
        description="How long a worker holds a job without renewing it (it renews every third "
        "of this while the job runs): a worker that died gives its job to another after at "
        "most this long.",
    )
    gate_poll_s: float = Field(
        default=2.0,
        gt=0,
        description="How often the `background` gate worker looks for ratings queued by "
        "other processes (its own submits wake it at once).",
    )

    export_org: str = Field(
        default="itsmreview",
        description="Harbor org of exported task and dataset names (`org/name`) when a task "
        "has no `org/name` of its own; `itsmreview export --org` overrides it.",
    )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return normalise_database_url(self.database_url)
        return f"sqlite:///{(self.data_dir / 'itsmreview.db').resolve()}"


def normalise_database_url(url: str) -> str:
    """PostgreSQL URLs without a driver (`postgresql://`, `postgres://`) get psycopg 3, the
    driver itsmreview ships with; SQLAlchemy would otherwise look for psycopg2.

    >>> normalise_database_url("postgres://u@db:5432/itsm")
    'postgresql+psycopg://u@db:5432/itsm'
    >>> normalise_database_url("postgresql+psycopg2://u@db/itsm")
    'postgresql+psycopg2://u@db/itsm'
    """
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


@lru_cache
def get_settings() -> Settings:
    return Settings()
